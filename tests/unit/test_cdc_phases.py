"""A CDC task's two phases and the hand-over between them: where each resumes from a
stored offset, the exact offsets each writes (the layout stored offsets keep), the
stream polled only once the snapshot is done, the snapshot's window dropped once the
stream is past it, and how long a lost connection is tried again. No database: the
phases open no connection before their first poll."""

from __future__ import annotations

import json
from typing import Any

import pytest

from onceflow.api.connector import (
    ConnectorError,
    RecordingTransactionContext,
    SourceRecord,
    TaskContext,
)
from onceflow.connectors.postgres import outage
from onceflow.connectors.postgres.catalog import Table
from onceflow.connectors.postgres.cdc import CdcTask
from onceflow.connectors.postgres.outage import RECONNECT_PAUSE_S, Outage
from onceflow.connectors.postgres.pgoutput import (
    Begin,
    Column,
    Commit,
    Insert,
    Relation,
    parse_lsn,
)
from onceflow.connectors.postgres.settings import DEFAULTS, SettingError
from onceflow.connectors.postgres.snapshot_window import Segment, SnapshotWindow
from onceflow.connectors.postgres.streaming_phase import BEFORE_ANYTHING

ORDERS = Table(1, "public.orders", ("id", "note"), (23, 25), ("integer", "text"), ("id",))
ITEMS = Table(2, "public.items", ("id",), (23,), ("integer",), ("id",))
TABLES = {"public.orders": ORDERS, "public.items": ITEMS}
PARTITION = {"system": "7301234567890123456", "slot": "orders"}
FIRST = {"table": "public.orders", "after": None, "lsn": "0/3000000"}
SECOND = {"table": "public.items", "after": None, "lsn": "0/4000000"}
STREAMING = {
    "tables": list(TABLES),
    "segments": [FIRST, SECOND],
    "lsn": "0/1",
    "change": "0/1",
    "seq": 0,
}
"""Streaming inside a window of two segments: orders read as of 0/3000000, items as of
0/4000000."""


def _task(stored: dict[str, Any], snapshot: str = "initial") -> CdcTask:
    """A task resumed from ``stored`` as its start resumes it."""
    task = CdcTask()
    task.context = TaskContext(
        task_id=0,
        config={},
        offsets=None,  # type: ignore[arg-type]
        transactions=RecordingTransactionContext(),
    )
    task.sql, task.conninfo = None, ""  # type: ignore[assignment]
    task.emitted = task.committed = 0
    config = {**DEFAULTS, "url": "postgresql://app@db/shop", "slot": "orders"}
    task._resume(
        {**config, "snapshot": snapshot, "tables": list(TABLES)}, TABLES, PARTITION, stored
    )
    return task


def test_a_new_source_snapshots_its_first_table_then_streams_from_the_slot_start() -> None:
    task = _task({})
    assert task.snapshot is not None
    assert task.snapshot.reader.reading == ("public.orders", None)
    assert task.streaming.position == BEFORE_ANYTHING
    assert _task({}, snapshot="never").snapshot is None


def test_a_source_stopped_mid_snapshot_continues_after_its_last_key() -> None:
    task = _task(
        {
            "tables": list(TABLES),
            "segments": [FIRST],
            "snapshot": {"table": "public.orders", "after": ["41"]},
        }
    )
    assert task.snapshot is not None
    assert task.snapshot.reader.reading == ("public.orders", ("41",))
    assert task.snapshot.window.segments == [Segment("public.orders", None, 0x3000000)]


def test_a_streamed_offset_resumes_the_stream_after_its_record_without_a_snapshot() -> None:
    task = _task({"tables": list(TABLES), "lsn": "0/16B3748", "change": "0/16B3740", "seq": 2})
    assert task.snapshot is None
    assert task.streaming.position == (parse_lsn("0/16B3748"), parse_lsn("0/16B3740"), 2)


def test_a_table_added_after_the_snapshot_is_refused_unless_there_are_no_snapshots() -> None:
    stored = {"tables": ["public.orders"], "lsn": "0/1", "change": "0/1", "seq": 0}
    with pytest.raises(SettingError, match=r"public\.items added after the initial snapshot"):
        _task(stored)
    assert _task(stored, snapshot="never").snapshot is None


def test_a_snapshot_record_stores_its_table_and_last_key_in_the_stored_layout() -> None:
    task = _task(
        {
            "tables": list(TABLES),
            "segments": [FIRST],
            "snapshot": {"table": "public.orders", "after": ["40"]},
        }
    )
    assert task.snapshot is not None
    (record,) = task.snapshot._records(ORDERS, [("41", "hello")])
    assert json.dumps(record.source_offset) == (
        '{"tables": ["public.orders", "public.items"], '
        '"segments": [{"table": "public.orders", "after": null, "lsn": "0/3000000"}], '
        '"snapshot": {"table": "public.orders", "after": ["41"]}}'
    )
    assert record.source_partition == PARTITION
    assert record.key == b'{"id":41}'
    assert record.value == (
        b'{"op":"r","table":"public.orders","before":null,"after":{"id":41,"note":"hello"},'
        b'"lsn":"0/3000000","txId":null,"commitTs":null}'
    )


def _insert_committed_at(task: CdcTask, commit_lsn: int) -> list[SourceRecord]:
    """One streamed transaction inserting one row of ``public.orders``."""
    relation = Relation(
        1, "public", "orders", "d", (Column("id", 23, True), Column("note", 25, False))
    )
    out: list[SourceRecord] = []
    stream = task.streaming
    stream._handle(relation, commit_lsn - 0x30, out)
    stream._handle(Begin(commit_lsn, 0, 731), commit_lsn - 0x30, out)
    stream._handle(Insert(1, ("7", "x")), commit_lsn - 0x20, out)
    stream._handle(Commit(commit_lsn, commit_lsn + 0x10, 0), commit_lsn, out)
    return out


def test_a_streamed_record_stores_its_position_and_the_window_until_past_it() -> None:
    task = _task(STREAMING)
    # Committed after the orders segment's export, before the items one: not in the
    # snapshot, and still inside the window the offsets carry.
    (inside,) = _insert_committed_at(task, 0x3800000)
    assert json.dumps(inside.source_offset) == (
        '{"tables": ["public.orders", "public.items"], '
        '"segments": [{"table": "public.orders", "after": null, "lsn": "0/3000000"}, '
        '{"table": "public.items", "after": null, "lsn": "0/4000000"}], '
        '"lsn": "0/3800000", "change": "0/37FFFE0", "seq": 0}'
    )
    assert inside.key == b'{"id":7}'
    assert inside.value == (
        b'{"op":"c","table":"public.orders","before":null,"after":{"id":7,"note":"x"},'
        b'"lsn":"0/3800000","txId":731,"commitTs":946684800000}'
    )
    (past,) = _insert_committed_at(task, 0x4000000)
    assert json.dumps(past.source_offset) == (
        '{"tables": ["public.orders", "public.items"], '
        '"lsn": "0/4000000", "change": "0/3FFFFE0", "seq": 0}'
    )


def test_a_change_the_snapshot_already_shows_is_not_streamed_again() -> None:
    task = _task(STREAMING)
    assert _insert_committed_at(task, 0x2800000) == []


def test_the_window_is_dropped_once_the_stream_reaches_its_end() -> None:
    window = SnapshotWindow(["public.orders"], [Segment("public.orders", None, 100)])
    window.streamed_to(99)
    assert window.to_offset() == {
        "tables": ["public.orders"],
        "segments": [FIRST | {"lsn": "0/64"}],
    }
    window.streamed_to(100)
    assert window.to_offset() == {"tables": ["public.orders"]}


class _Phase:
    def __init__(self, *polls: list[SourceRecord]) -> None:
        self.polls = list(polls)

    @property
    def done(self) -> bool:
        return not self.polls

    def poll(self) -> list[SourceRecord]:
        return self.polls.pop(0)


def test_the_stream_takes_over_once_the_snapshot_is_done() -> None:
    task = _task({})
    rows = [SourceRecord(PARTITION, {"snapshot": n}, b"") for n in range(2)]
    streamed = [SourceRecord(PARTITION, {"lsn": "0/5"}, b"")]
    task.snapshot = _Phase(rows, [])  # type: ignore[assignment]
    task.streaming.poll = lambda: streamed  # type: ignore[method-assign]
    assert task.poll() == rows
    assert not task.streaming.delivered(), "snapshot rows polled and not yet committed"
    for row in rows:
        task.commit_record(row)
    assert task.streaming.delivered()
    assert task.poll() == [], "the snapshot's last poll: it finds nothing more"
    assert task.snapshot is None
    assert task.poll() == streamed
    task.commit_record(streamed[0])
    assert task.streaming.confirmable == 5


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_a_lost_connection_is_tried_again_until_the_timeout_then_named_masked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = _Clock()
    monkeypatch.setattr(outage, "time", clock)
    lost = Outage(timeout_s=1.0, secrets={"password": "hunter2"})
    refused = OSError("password hunter2 refused")
    for _ in range(3):
        lost.pause_or_give_up("replication did not resume", refused)
    assert clock.slept == [RECONNECT_PAUSE_S] * 3
    with pytest.raises(ConnectorError) as raised:
        lost.pause_or_give_up("replication did not resume", refused)
    assert str(raised.value) == (
        "config.url: replication did not resume within reconnectTimeoutMs (password *** refused)"
    )


def _pauses_before_giving_up(lost: Outage) -> int:
    pauses = 0
    with pytest.raises(ConnectorError):
        while True:
            lost.pause_or_give_up("replication did not resume", OSError())
            pauses += 1
    return pauses


def test_a_connection_lost_again_gets_the_whole_timeout_anew(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = _Clock()
    monkeypatch.setattr(outage, "time", clock)
    lost = Outage(timeout_s=1.0, secrets={})
    assert _pauses_before_giving_up(lost) == 3  # at 0, 0.5 and 1.0 s; over at 1.5 s
    lost.end()
    clock.now += 60
    assert _pauses_before_giving_up(lost) == 3, "an outage that ended counts no more"
    lost.end()
    lost.pause_or_give_up("replication did not resume", OSError())
    lost.start()  # lost again after a reconnect: the clock starts over
    assert _pauses_before_giving_up(lost) == 3
