"""The JSON layout of the postgres connector's records (documented in
docs/connectors.md, "Record layout").

Key: the primary key columns, ``{"id": 42}``. Value::

    {"op": "r|c|u|d|t", "table": "public.orders",
     "before": {...} | null, "after": {...} | null,
     "lsn": "0/16B3748", "txId": 731, "commitTs": 1700000000000}

``r`` is a row read by the snapshot (``lsn`` is the snapshot's position, ``txId`` and
``commitTs`` null); ``before`` holds what REPLICA IDENTITY gives (the key by default,
the whole row under FULL). Columns keep PostgreSQL's text form except booleans,
integers, finite floats and json/jsonb, which become their JSON counterparts; numeric
stays a string so no digit is lost. A large (TOASTed) value an update did not change is
not sent by PostgreSQL: it is left out of ``after`` and named in ``unchangedToast``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from functools import lru_cache
from json.encoder import encode_basestring_ascii as json_text
from typing import NamedTuple

from onceflow.connectors.postgres.catalog import Table
from onceflow.connectors.postgres.pgoutput import (
    UNCHANGED_TOAST,
    Delete,
    Insert,
    Relation,
    Tuple,
    Update,
)
from onceflow.connectors.postgres.snapshot_window import Key

BOOL, INT2, INT4, INT8, OID, FLOAT4, FLOAT8, JSON, JSONB = 16, 21, 23, 20, 26, 700, 701, 114, 3802

_COMPACT = json.JSONEncoder(separators=(",", ":"))
"""The layout's JSON: compact, ASCII (``\\uXXXX`` escapes), as ``json.dumps`` writes it."""


def _boolean(text: str) -> str:
    return "true" if text == "t" else "false"


def _integer(text: str) -> str:
    return str(int(text))


def _floating(text: str) -> str:
    """A finite float as a JSON number; ``NaN`` and the infinities stay strings."""
    number = float(text)
    return float.__repr__(number) if math.isfinite(number) else json_text(text)


def _json(text: str) -> str:
    return _COMPACT.encode(json.loads(text))


_VALUE_WRITERS: dict[int, Callable[[str], str]] = {
    BOOL: _boolean,
    INT2: _integer,
    INT4: _integer,
    INT8: _integer,
    OID: _integer,
    FLOAT4: _floating,
    FLOAT8: _floating,
    JSON: _json,
    JSONB: _json,
}
"""A column's text as JSON by its type: anything not here is a JSON string."""


class RowJson:
    """Rows of a set of columns written as the text of a JSON object, column by column.

    Records are written as text directly rather than built as dicts and encoded: under a
    flood of changes the per-change work is the connector's rate, and a dict, its
    encoding and the typed values in between cost several times the text itself."""

    def __init__(
        self, names: Sequence[str], types: Sequence[int], only: frozenset[str] | None
    ) -> None:
        self.fields = [
            (at, name, json_text(name) + ":", _VALUE_WRITERS.get(type_oid, json_text))
            for at, (name, type_oid) in enumerate(zip(names, types, strict=True))
            if only is None or name in only
        ]

    def write(self, values: Sequence[object]) -> tuple[str, list[str]]:
        """The object (only the columns it was made for), and the columns left out
        because their value was not sent."""
        parts: list[str] = []
        unchanged: list[str] = []
        for at, name, label, write in self.fields:
            value = values[at]
            if value is None:
                parts.append(label + "null")
            elif value is UNCHANGED_TOAST:
                unchanged.append(name)
            else:
                parts.append(label + write(str(value)))
        return "{" + ",".join(parts) + "}", unchanged


@lru_cache(maxsize=1024)
def row_json(
    names: tuple[str, ...], types: tuple[int, ...], only: frozenset[str] | None = None
) -> RowJson:
    """The writer of rows of ``names`` (of ``types``), keeping ``only`` those columns."""
    return RowJson(names, types, only)


def record_key(table: Table, key: Key) -> bytes:
    """The record's key: the primary key's columns, typed as in the value."""
    return row_json(table.key, table.key_types).write(key)[0].encode()


def row_value(table: Table, row: Sequence[object]) -> str:
    """A row of ``table``'s columns (read by a query) as a JSON object."""
    return row_json(table.columns, table.types).write(row)[0]


class Change(NamedTuple):
    """One record's share of a change: the rows as JSON objects (None for none)."""

    op: str
    key: Key
    before: str | None
    after: str | None
    unchanged: list[str]
    """Columns of ``after`` left out: a large (TOASTed) value the update did not change."""


def position_fields(lsn: str, tx_id: int | None, commit_ms: int | None) -> str:
    """The fields that close every record's value: where and when it was committed."""
    tx = "null" if tx_id is None else str(tx_id)
    ms = "null" if commit_ms is None else str(commit_ms)
    return f',"lsn":"{lsn}","txId":{tx},"commitTs":{ms}}}'


def change_value(table: str, change: Change, closing: str) -> bytes:
    """A record's value in the layout above; ``closing`` from ``position_fields``."""
    toast = f',"unchangedToast":{_COMPACT.encode(change.unchanged)}' if change.unchanged else ""
    before = "null" if change.before is None else change.before
    after = "null" if change.after is None else change.after
    return (
        f'{{"op":"{change.op}","table":{json_text(table)},"before":{before},"after":{after}'
        f"{toast}{closing}"
    ).encode()


def changes_of(message: Insert | Update | Delete, relation: Relation, table: Table) -> list[Change]:
    """The records a change makes. An update that changes the primary key is a delete
    of the old key and an insert of the new one, so each key's records stay in order
    in their partition."""
    names, types = relation.names, relation.types
    row = row_json(names, types)
    # Under REPLICA IDENTITY DEFAULT the old row holds only the key (the other columns
    # come as nulls that mean "not sent"); under FULL, all of it.
    old_row = row if relation.replica_identity == "f" else row_json(names, types, relation.identity)
    at = relation.position

    def key_of(values: Tuple) -> Key:
        return tuple(None if (v := values[at[k]]) is None else str(v) for k in table.key)

    if isinstance(message, Insert):
        return [Change("c", key_of(message.new), None, row.write(message.new)[0], [])]
    if isinstance(message, Delete):
        return [Change("d", key_of(message.old), old_row.write(message.old)[0], None, [])]
    new_key = key_of(message.new)
    old_key = key_of(message.old) if message.old is not None else new_key
    before = None if message.old is None else old_row.write(message.old)[0]
    after, unchanged = row.write(message.new)
    if old_key != new_key:
        return [
            Change("d", old_key, before, None, []),
            Change("c", new_key, None, after, []),
        ]
    return [Change("u", new_key, before, after, unchanged)]
