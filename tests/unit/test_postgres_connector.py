"""The ``postgres`` connector's pure parts: settings refused by name, planning, the
exactly-once answer per mode, pgoutput decoding, and which streamed changes a
segmented snapshot already holds."""

from __future__ import annotations

import json
import struct
from typing import Any

import pytest

from onceflow.connectors.postgres import PostgresConnector
from onceflow.connectors.postgres.catalog import Table
from onceflow.connectors.postgres.change_records import (
    Change,
    change_value,
    changes_of,
    position_fields,
)
from onceflow.connectors.postgres.pgoutput import (
    UNCHANGED_TOAST,
    Begin,
    Column,
    Commit,
    Delete,
    Ignored,
    Insert,
    Keepalive,
    Relation,
    Truncate,
    Update,
    XLogData,
    decode,
    decode_frame,
    lsn_text,
    parse_lsn,
)
from onceflow.connectors.postgres.snapshot_window import Key, Segment, already_read
from tests.support.cdc import audit_changes

CDC = {"url": "postgresql://app@db:5432/shop", "tables": ["public.orders"], "slot": "orders"}
QUERY = {**CDC, "mode": "incrementing", "incrementingColumn": "id"}
del QUERY["slot"]


@pytest.mark.parametrize(
    ("config", "field", "words"),
    [
        ({**CDC, "mode": "binlog"}, "mode", "one of cdc"),
        ({**CDC, "url": ""}, "url", "connection string"),
        ({**CDC, "url": "postgresql://app:secret@db/shop"}, "url", "secretRef"),
        ({**CDC, "tables": []}, "tables", "non-empty list"),
        ({**CDC, "tables": ["a", "a"]}, "tables", "distinct"),
        ({**CDC, "slot": "Bad-Name"}, "slot", "a-z, 0-9 and _"),
        ({k: v for k, v in CDC.items() if k != "slot"}, "slot", "replication slot"),
        ({**CDC, "snapshot": "always"}, "snapshot", "initial, never"),
        ({**CDC, "transactionsPerCommit": 0}, "transactionsPerCommit", ">= 1"),
        ({**CDC, "lsn": "0/0"}, "lsn", "unknown setting"),
        (
            {k: v for k, v in QUERY.items() if k != "incrementingColumn"},
            "incrementingColumn",
            "required",
        ),
        ({**QUERY, "mode": "timestamp+incrementing"}, "timestampColumn", "required"),
        ({**QUERY, "timestampColumn": "ts"}, "timestampColumn", "only used"),
    ],
)
def test_a_config_the_connector_cannot_run_is_refused_naming_the_setting(
    config: dict[str, Any], field: str, words: str
) -> None:
    problems = PostgresConnector().validate(config)
    assert [p.field for p in problems] == [field], problems
    assert words in problems[0].message


def test_cdc_runs_as_one_task_and_query_modes_split_the_tables() -> None:
    connector = PostgresConnector()
    assert connector.validate(CDC) == [] and connector.validate(QUERY) == []
    assert len(connector.task_configs(CDC, 4)) == 1
    tables = {**QUERY, "tables": ["a", "b", "c"]}
    split = [c["tables"] for c in connector.task_configs(tables, 2)]
    assert split == [["a", "c"], ["b"]]
    assert len(connector.task_configs(tables, 8)) == 3


def test_only_timestamp_mode_declines_exactly_once_and_says_why() -> None:
    connector = PostgresConnector()
    assert connector.exactly_once_support(CDC) and connector.exactly_once_support(QUERY)
    timestamp = {**QUERY, "mode": "timestamp+incrementing", "timestampColumn": "ts"}
    assert not connector.exactly_once_support(timestamp)
    assert "use mode incrementing" in (connector.exactly_once_refusal(timestamp) or "")
    assert connector.can_define_transaction_boundaries(CDC)
    assert not connector.can_define_transaction_boundaries(QUERY)


def _text(*values: str | None) -> bytes:
    out = struct.pack(">H", len(values))
    for v in values:
        out += b"n" if v is None else b"t" + struct.pack(">I", len(v)) + v.encode()
    return out


def test_pgoutput_messages_decode_to_their_fields() -> None:
    assert lsn_text(parse_lsn("16/B374D848")) == "16/B374D848"
    assert decode(b"B" + struct.pack(">QqI", 0x1528628, 5, 731)) == Begin(0x1528628, 5, 731)
    assert decode(b"C\0" + struct.pack(">QQq", 10, 20, 5)) == Commit(10, 20, 5)
    relation = decode(
        b"R"
        + struct.pack(">I", 16384)
        + b"public\0orders\0d"
        + struct.pack(">H", 2)
        + b"\x01id\0"
        + struct.pack(">Ii", 23, -1)
        + b"\x00note\0"
        + struct.pack(">Ii", 25, -1)
    )
    assert isinstance(relation, Relation) and relation.qualified == "public.orders"
    assert [(c.name, c.type_oid, c.in_key) for c in relation.columns] == [
        ("id", 23, True),
        ("note", 25, False),
    ]
    assert decode(b"I" + struct.pack(">I", 1) + b"N" + _text("1", None)) == Insert(1, ("1", None))
    toast = struct.pack(">H", 2) + b"t" + struct.pack(">I", 1) + b"1u"
    assert decode(b"U" + struct.pack(">I", 1) + b"N" + toast) == Update(
        1, None, ("1", UNCHANGED_TOAST)
    )
    assert decode(
        b"U" + struct.pack(">I", 1) + b"K" + _text("1", None) + b"N" + _text("2", "x")
    ) == (Update(1, ("1", None), ("2", "x")))
    assert decode(b"D" + struct.pack(">I", 1) + b"K" + _text("1", None)) == Delete(1, ("1", None))
    assert decode(b"T" + struct.pack(">IBII", 2, 0, 7, 8)) == Truncate((7, 8))
    assert decode(b"O" + b"anything") == Ignored("O")


def test_replication_frames_decode() -> None:
    data = decode_frame(b"w" + struct.pack(">QQq", 1, 2, 3) + b"payload")
    assert data == XLogData(1, 2, b"payload")
    assert decode_frame(b"k" + struct.pack(">QqB", 9, 0, 1)) == Keepalive(9, True)


def _after(table: str, key: Key, boundary: Key) -> bool:
    return int(key[0] or 0) > int(boundary[0] or 0)


ORDER = ["public.a", "public.b"]
# a from its start as of 100; a after key 50 as of 200; b after key 10 as of 300.
SEGMENTS = [
    Segment("public.a", None, 100),
    Segment("public.a", ("50",), 200),
    Segment("public.b", ("10",), 300),
]


@pytest.mark.parametrize(
    ("table", "key", "commit", "read"),
    [
        ("public.a", "7", 99, True),  # committed before the first segment's export
        ("public.a", "7", 100, False),  # a commit at the export's position is not in it
        ("public.a", "7", 150, False),  # first segment read before the change
        ("public.a", "50", 150, False),  # the boundary key belongs to the earlier segment
        ("public.a", "51", 150, True),  # second segment read after it
        ("public.b", "11", 300, False),  # the last segment's own position: streamed
        ("public.a", "51", 250, False),
        ("public.b", "3", 150, True),  # b's head was read in a's second segment (at 200)
        ("public.b", "3", 250, False),
        ("public.b", "11", 250, True),
        ("public.b", "11", 301, False),  # past every segment
        ("public.c", "1", 50, False),  # not a snapshotted table
    ],
)
def test_a_change_is_skipped_only_when_its_rows_segment_was_read_after_it(
    table: str, key: str, commit: int, read: bool
) -> None:
    assert already_read(SEGMENTS, table, (key,), commit, ORDER, _after) is read


def test_segments_round_trip_through_offsets() -> None:
    for segment in SEGMENTS:
        assert Segment.from_offset(segment.to_offset()) == segment


def _change(op: str, version: int | None) -> dict[str, Any]:
    return {"op": op, "after": None if version is None else {"version": version}}


def test_the_change_audit_finds_repeats_gaps_and_changes_not_delivered() -> None:
    good = [
        (1, _change("r", 3)),
        (1, _change("u", 4)),
        (2, _change("c", 1)),
        (2, _change("d", None)),
    ]
    assert audit_changes(good, {1: 4}).ok
    assert not audit_changes([*good, (1, _change("u", 4))], {1: 4}).ok  # repeated
    assert not audit_changes([good[0], good[2], good[3]], {1: 4}).ok  # gap then behind
    assert not audit_changes([*good, (2, _change("c", 1))], {1: 4}).ok  # re-inserted
    assert not audit_changes(good, {1: 5}).caught_up
    late_delete = audit_changes(good[:3], {1: 4})  # id 2's delete not delivered yet
    assert not late_delete.problems and not late_delete.caught_up


ORDERS = Table(1, "public.orders", ("id", "note"), (23, 25), ("integer", "text"), ("id",))


def _relation(identity: str) -> Relation:
    flags = (True, identity == "f")
    return Relation(
        1,
        "public",
        "orders",
        identity,
        (Column("id", 23, flags[0]), Column("note", 25, flags[1])),
    )


def test_a_delete_names_the_key_only_unless_the_whole_old_row_is_sent() -> None:
    delete = Delete(1, ("7", None))
    (default,) = changes_of(delete, _relation("d"), ORDERS)
    assert default == Change("d", ("7",), '{"id":7}', None, [])
    (full,) = changes_of(Delete(1, ("7", "gone")), _relation("f"), ORDERS)
    assert full.before == '{"id":7,"note":"gone"}'


def test_a_key_change_is_a_delete_of_the_old_key_and_an_insert_of_the_new() -> None:
    update = Update(1, ("7", None), ("8", "x"))
    assert changes_of(update, _relation("d"), ORDERS) == [
        Change("d", ("7",), '{"id":7}', None, []),
        Change("c", ("8",), None, '{"id":8,"note":"x"}', []),
    ]


def test_an_unchanged_toasted_value_is_named_not_invented() -> None:
    (change,) = changes_of(Update(1, None, ("7", UNCHANGED_TOAST)), _relation("d"), ORDERS)
    assert change == Change("u", ("7",), None, '{"id":7}', ["note"])
    value = json.loads(change_value("public.orders", change, position_fields("0/1", 5, 9)))
    assert value == {
        "op": "u",
        "table": "public.orders",
        "before": None,
        "after": {"id": 7},
        "unchangedToast": ["note"],
        "lsn": "0/1",
        "txId": 5,
        "commitTs": 9,
    }
