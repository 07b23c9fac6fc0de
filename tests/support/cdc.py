"""A PostgreSQL table whose every change can be audited from the postgres connector's
records: each row carries a ``version`` that starts at 1 and grows by one per update,
ids are never reused, so a key's records must show consecutive versions ending with
the row's final version (or a delete) — a duplicate repeats a version, a loss skips
one, a reordering goes backwards."""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import psycopg
from confluent_kafka import Message

from onceflow.eos.consume import read_to_end
from tests.support.background import BackgroundWork


def create_table(dsn: str, table: str, rows: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.execute(
            f"CREATE TABLE {table} (id bigint PRIMARY KEY, version int NOT NULL, payload text)"
        )
        conn.execute(
            f"INSERT INTO {table} SELECT g, 1, md5(g::text) FROM generate_series(1, %s) g",
            (rows,),
        )


def final_versions(dsn: str, table: str) -> dict[int, int]:
    with psycopg.connect(dsn) as conn:
        return dict(conn.execute(f"SELECT id, version FROM {table}").fetchall())


def drop_slot(dsn: str, slot: str) -> None:
    """Drops a replication slot no task holds any more: a forgotten one keeps WAL on
    the test bed's server for good."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
            " WHERE slot_name = %s AND NOT active",
            (slot,),
        )


def slot_released(dsn: str, slot: str) -> bool:
    """No process streams the slot (or there is no such slot)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,)
        ).fetchone()
    return row is None or not row[0]


PACE_EVERY = 500
"""The Loader pauses for its ``pace_s`` once per this many changes."""


def reconnect(dsn: str, within_s: float = 60, autocommit: bool = False) -> psycopg.Connection[Any]:
    """A session, once the server answers: a load outlives a restart of its server."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            return psycopg.connect(dsn, autocommit=autocommit)
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


class Loader(BackgroundWork):
    """``changes`` changes, one to five per transaction: inserts (some by COPY, whose
    rows share one WAL record), updates, deletes, and primary-key changes (which the
    connector writes as a delete of the old key and an insert of the new one at
    version 1). Ids are never reused; ``existing`` rows are there before. It pauses
    ``pace_s`` after every PACE_EVERY changes, so ``changes // PACE_EVERY * pace_s``
    is the least it takes. With ``bulk_update_at``, once that many changes are done,
    one transaction updates every row of the table (a bulk ``UPDATE``, larger than a
    source's bound on a Kafka transaction)."""

    def __init__(
        self,
        dsn: str,
        table: str,
        existing: int,
        changes: int,
        pace_s: float,
        bulk_update_at: int | None = None,
    ) -> None:
        super().__init__()
        self.dsn, self.table, self.changes, self.pace_s = dsn, table, changes, pace_s
        self.live = list(range(1, existing + 1))
        self.next_id = existing + 1
        self.done = self.deleted = self.pauses = 0
        self.bulk_update_at = bulk_update_at
        self.rng = random.Random(4)
        self.ending = threading.Event()

    def end_early(self) -> None:
        """Ends the load after its current transaction, however many changes it was
        given: a load that must last as long as something else does."""
        self.ending.set()

    def work(self) -> None:
        conn = psycopg.connect(self.dsn, autocommit=True)
        try:
            while self.done < self.changes and not self.ending.is_set():
                if self.changes - self.done <= 5:
                    self.hold_until_released()
                try:
                    self._transaction(conn)
                except psycopg.OperationalError:
                    if not conn.broken:  # a failing statement, not a lost server
                        raise
                    conn.close()
                    conn = self._reconnect()
                if self.pace_s and self.done // PACE_EVERY > self.pauses:
                    self.pauses += 1
                    time.sleep(self.pace_s)
        finally:
            conn.close()

    def _transaction(self, conn: psycopg.Connection[Any]) -> None:
        with conn.transaction():
            for _ in range(self.rng.randint(1, 5)):
                if self.done < self.changes:
                    self.done += self._change(conn)
        if self.bulk_update_at is not None and self.done >= self.bulk_update_at:
            conn.execute(f"UPDATE {self.table} SET version = version + 1")
            self.bulk_update_at = None

    def _reconnect(self) -> psycopg.Connection[Any]:
        """A new session once the server answers again, and the rows it holds: whether
        the transaction cut short committed is not known, and the table is the truth
        the audit reads anyway. Ids stay never reused."""
        conn = reconnect(self.dsn, autocommit=True)
        ids = [id_ for (id_,) in conn.execute(f"SELECT id FROM {self.table} ORDER BY id")]
        self.live = ids
        self.next_id = max([self.next_id, *(i + 1 for i in ids)])
        return conn

    def _new_id(self) -> int:
        self.next_id += 1
        self.live.append(self.next_id - 1)
        return self.next_id - 1

    def _change(self, conn: psycopg.Connection[Any]) -> int:
        """One change (or a COPY of three rows); how many rows it changed."""
        roll = self.rng.random()
        if roll < 0.35 or len(self.live) < 10:
            conn.execute(f"INSERT INTO {self.table} VALUES (%s, 1, 'new')", (self._new_id(),))
        elif roll < 0.4:
            with conn.cursor().copy(f"COPY {self.table} (id, version, payload) FROM STDIN") as copy:
                for _ in range(3):
                    copy.write_row((self._new_id(), 1, "copied"))
            return 3
        elif roll < 0.85:
            victim = self.live[self.rng.randrange(len(self.live))]
            conn.execute(f"UPDATE {self.table} SET version = version + 1 WHERE id = %s", (victim,))
        elif roll < 0.9:
            victim = self.live.pop(self.rng.randrange(len(self.live)))
            conn.execute(
                f"UPDATE {self.table} SET id = %s, version = 1 WHERE id = %s",
                (self._new_id(), victim),
            )
            self.deleted += 1
        else:
            victim = self.live.pop(self.rng.randrange(len(self.live)))
            conn.execute(f"DELETE FROM {self.table} WHERE id = %s", (victim,))
            self.deleted += 1
        return 1


@dataclass
class ChangeAudit:
    keys: int = 0
    records: int = 0
    snapshot_reads: int = 0
    problems: list[str] = field(default_factory=list)
    """Records out of turn: repeated, skipped or reordered changes."""
    behind: list[str] = field(default_factory=list)
    """Keys whose last record is not the table's final state (yet): a change not
    delivered so far, a delete included, is only known lost once it never comes."""

    @property
    def caught_up(self) -> bool:
        return not self.behind

    @property
    def ok(self) -> bool:
        return not self.problems and not self.behind


def read_change_messages(bootstrap: str, topic: str) -> list[Message]:
    """The topic's records ``read_committed``, in log order per partition."""
    return list(read_to_end(bootstrap, topic, isolation="read_committed", timeout_s=120))


def changes_of(messages: Iterable[Message]) -> list[tuple[int, dict[str, Any]]]:
    """``(id, value)`` per record."""
    return [
        (json.loads(m.key() or b"null")["id"], json.loads(m.value() or b"null")) for m in messages
    ]


def read_changes(bootstrap: str, topic: str) -> list[tuple[int, dict[str, Any]]]:
    """``(id, value)`` per record, in log order per partition (``read_committed``)."""
    return changes_of(read_change_messages(bootstrap, topic))


def largest_kafka_transactions(messages: Iterable[Message]) -> dict[int, int]:
    """Per database transaction (``txId``), the most of its records one Kafka transaction
    holds, as far as a reader can tell: a Kafka transaction's commit marker takes an
    offset of its partition, so records at consecutive offsets are of one Kafka
    transaction, and a gap between two starts another. That holds for a partition with
    one writer (one task); a Kafka transaction spanning N partitions is seen as N
    pieces, so a topic of one partition measures it whole. Snapshot reads (no ``txId``)
    are left out."""
    largest: dict[int, int] = {}
    run_txid: int | None = None
    run = 0
    previous: tuple[int, int] | None = None
    for message in sorted(messages, key=lambda m: (m.partition(), m.offset())):
        txid = json.loads(message.value() or b"null")["txId"]
        place = (message.partition(), message.offset())
        adjacent = previous is not None and place == (previous[0], previous[1] + 1)
        run = run + 1 if adjacent and txid == run_txid else 1
        run_txid, previous = txid, place
        if txid is not None:
            largest[txid] = max(largest.get(txid, 0), run)
    return largest


def _out_of_turn(key: int, value: dict[str, Any], before: dict[str, Any] | None) -> str | None:
    op = value["op"]
    if op in ("r", "c"):
        if before is not None:
            return f"id {key}: {op} after {before['op']} (a repeated read or insert)"
        if op == "c" and value["after"]["version"] != 1:
            return f"id {key}: inserted at version {value['after']['version']}"
        return None
    if before is None or before["op"] == "d":
        return f"id {key}: {op} without a live row before it"
    if op == "u" and value["after"]["version"] != before["after"]["version"] + 1:
        return f"id {key}: version {before['after']['version']} then {value['after']['version']}"
    return None


def audit_changes(
    changes: Iterable[tuple[int, dict[str, Any]]], final: dict[int, int]
) -> ChangeAudit:
    """Every key's records against the rule above and the table's final state."""
    audit = ChangeAudit()
    last: dict[int, dict[str, Any]] = {}
    for key, value in changes:
        audit.records += 1
        audit.snapshot_reads += value["op"] == "r"
        if problem := _out_of_turn(key, value, last.get(key)):
            audit.problems.append(problem)
        last[key] = value
    audit.keys = len(last)
    for key, version in final.items():
        seen = last.get(key)
        if seen is None or seen["op"] == "d":
            audit.behind.append(f"id {key}: in the table (version {version}) but not live")
        elif seen["after"]["version"] != version:
            audit.behind.append(
                f"id {key}: last record at version {seen['after']['version']}, table at {version}"
            )
    for key, seen in last.items():
        if key not in final and seen["op"] != "d":
            audit.behind.append(
                f"id {key}: deleted from the table but its last record is {seen['op']}"
            )
    return audit
