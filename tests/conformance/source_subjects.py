"""The built-in connectors as subjects of the source conformance kit: for each, its
config, its load (source_loads.py) and its audit against its source system's truth.

Each is made by ``from_fixtures`` from the session fixtures it needs, asked for by
name, so a subject that needs no PostgreSQL never starts it."""

from __future__ import annotations

import json
import math
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any, NamedTuple

import psycopg
from confluent_kafka import Message

from onceflow.connectors.files import owner_task
from onceflow.eos.audit_reader import read_sequences
from onceflow.eos.consume import read_to_end
from onceflow.logic.audit import audit_sequences
from tests.conformance.fixtures import FixtureLookup
from tests.conformance.source_kit import (
    KitAudit,
    KitSize,
    SourceFault,
    SourceRefusal,
    SourceSubject,
)
from tests.conformance.source_loads import (
    DeliveryWatch,
    FileWriters,
    TableWriters,
    UpstreamTransactions,
)
from tests.conformance.truth import in_order_audit, sequence_audit
from tests.support.background import BackgroundWork
from tests.support.cdc import (
    PACE_EVERY,
    Loader,
    audit_changes,
    changes_of,
    create_table,
    drop_slot,
    final_versions,
    largest_kafka_transactions,
    read_change_messages,
)
from tests.support.kafka import new_topic
from tests.support.postgres_query import (
    create_writer_table,
    delivered_ids,
    incrementing_config,
    table_ids,
)
from tests.support.standby import hot_standby
from tests.support.testbed import restart_postgres
from tests.support.waiting import wait_for


class IntervalBoundary(SourceSubject):
    """For a connector whose poll's transaction lasts milliseconds: under a 300 ms
    interval one is open most of the time, so SIGKILLs inside one are sure to come
    (the kit's evidence), and the interval boundary is run through faults too."""

    boundary = "interval"
    interval_ms = 300


class SequenceSubject(IntervalBoundary):
    """``sequence``: streams counting 1, 2, 3... made by the connector itself. Its truth
    is every stream 1..limit, audited by the product's own ``audit_sequences``. The
    restart moves the streams from three tasks to two."""

    name = "sequence"
    connector = "sequence"
    tasks_max = 3
    restart_tasks_max = 2
    STREAMS = 6
    BATCH = 20

    def __init__(self) -> None:
        self.limit = 0

    @classmethod
    def from_fixtures(cls, fixture: FixtureLookup) -> SequenceSubject:
        return cls()

    def config(self, workdir: Path, size: KitSize) -> dict[str, Any]:
        """Paced so that generation 1, even unharmed, takes ``size.load_s`` to count to
        the limit."""
        self.limit = size.records
        polls = math.ceil(self.STREAMS / self.tasks_max) * self.limit / self.BATCH
        return {
            "streams": self.STREAMS,
            "limit": self.limit,
            "batchSize": self.BATCH,
            "pollIntervalMs": max(20, math.ceil(size.load_s * 1000 / polls)),
        }

    def load(self, size: KitSize, bootstrap: str, topic: str) -> BackgroundWork:
        return DeliveryWatch(lambda: self.audit(bootstrap, topic), size.load_s * 3 + 120)

    def audit(self, bootstrap: str, topic: str) -> KitAudit:
        try:
            pairs, unparsable = read_sequences(
                bootstrap, topic, key_field="stream", seq_field="seq"
            )
        except LookupError:  # no task has created the topic yet
            pairs, unparsable = [], 0
        streams = [f"s{i}" for i in range(self.STREAMS)]
        report = audit_sequences(
            pairs, expected_keys=streams, key_count=self.STREAMS, unparsable=unparsable
        )
        return sequence_audit(report, self.limit)


class FilesSubject(IntervalBoundary):
    """``files``: lines appended to files while two tasks read them, each owning some
    of the files. Its truth is each file's complete lines, in order."""

    name = "files"
    connector = "files"
    tasks_max = 2
    FILES = 5

    def __init__(self) -> None:
        self.directory = Path()

    @classmethod
    def from_fixtures(cls, fixture: FixtureLookup) -> FilesSubject:
        return cls()

    def config(self, workdir: Path, size: KitSize) -> dict[str, Any]:
        """A directory whose files both tasks share (ownership hashes the full path)."""
        self.directory = next(
            d
            for d in (workdir / f"data-{n}" for n in range(100))
            if {owner_task(str(d / f"part-{f}.jsonl"), self.tasks_max) for f in range(self.FILES)}
            == set(range(self.tasks_max))
        )
        self.directory.mkdir()
        return {"paths": [str(self.directory / "*.jsonl")], "batchSize": 40, "scanIntervalMs": 200}

    def load(self, size: KitSize, bootstrap: str, topic: str) -> BackgroundWork:
        return FileWriters(self.directory, self.FILES, size.records // 2, size.load_s)

    def audit(self, bootstrap: str, topic: str) -> KitAudit:
        delivered: dict[str, list[bytes]] = {}
        for message in read_to_end(bootstrap, topic):
            key = (message.key() or b"").decode()
            delivered.setdefault(key, []).append(message.value() or b"")
        truth = {
            str(path): path.read_bytes().split(b"\n")[:-1]  # complete lines only
            for path in sorted(self.directory.glob("*.jsonl"))
        }
        return in_order_audit(delivered, truth, show=bytes.decode)

    def refusals(self) -> list[SourceRefusal]:
        path = self.directory / "part-0.jsonl"
        return [
            SourceRefusal(
                "a file truncated and regrown between two polls",
                lambda: self._regrow(path),
                f"{path} was ",
            )
        ]

    @staticmethod
    def _regrow(path: Path) -> None:
        """Emptied and written again under the same inode, past the position read (a
        copy-and-truncate log rotation, then a burst of new lines)."""
        size = path.stat().st_size
        line = json.dumps({"stream": "rotated", "seq": 0}).encode() + b"\n"
        with path.open("r+b") as file:
            file.truncate(0)
            file.write(line * (size // len(line) + 2))


class PostgresIncrementingSubject(IntervalBoundary):
    """``postgres`` in ``mode: incrementing``: rows inserted by two concurrent sessions.
    Its truth is the table's ids, each delivered once, ascending (a smaller id that
    commits late must be neither skipped nor sent after a larger one). Refused: the
    url reaching a read replica, whose high-water mark sees only the replica's own
    transactions (eos-review 2026-11-27, hole 2)."""

    name = "postgres-incrementing"
    connector = "postgres"
    tasks_max = 1

    def __init__(self, dsn: str) -> None:
        self.dsn, self.table = dsn, ""
        self.settings: dict[str, Any] = {}
        self.replicas = ExitStack()

    @classmethod
    def from_fixtures(cls, fixture: FixtureLookup) -> PostgresIncrementingSubject:
        return cls(fixture("postgres_dsn"))

    def config(self, workdir: Path, size: KitSize) -> dict[str, Any]:
        self.table = create_writer_table(self.dsn)
        self.settings = incrementing_config(self.dsn, self.table)
        return self.settings

    def load(self, size: KitSize, bootstrap: str, topic: str) -> BackgroundWork:
        return TableWriters(self.dsn, self.table, size.records * 2, size.load_s)

    def audit(self, bootstrap: str, topic: str) -> KitAudit:
        delivered = {self.table: delivered_ids(bootstrap, topic)}
        return in_order_audit(delivered, {self.table: table_ids(self.dsn, self.table)}, str)

    def faults(self) -> list[SourceFault]:
        # The task ends on a lost connection and resumes from its committed offsets
        # when restarted; one restarted while the server is down ends at its start.
        ends = ("config.url: the connection was lost", "did not accept the connection")
        return [
            SourceFault("terminate the query's session", self._terminate, ends_tasks=ends),
            SourceFault("restart PostgreSQL", self._restart_server, ends_tasks=ends),
        ]

    def _sessions(self, end: bool, within_s: float = 30.0) -> bool:
        """Waits until a task holds a session (one restarted a moment ago may not have
        connected yet); ``end``: and ends it (``pg_terminate_backend``)."""
        what = "pg_terminate_backend(pid)" if end else "true"
        deadline = time.monotonic() + within_s
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            while not any(
                hit
                for (hit,) in conn.execute(
                    f"SELECT {what} FROM pg_stat_activity WHERE application_name = 'onceflow-query'"
                ).fetchall()
            ):
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.05)
        return True

    def _terminate(self) -> bool:
        return self._sessions(end=True)

    def refusals(self) -> list[SourceRefusal]:
        return [
            SourceRefusal(
                "the url reaches a read replica",
                self._to_replica,
                says="config.url: the server is a hot standby",
            )
        ]

    def _to_replica(self) -> dict[str, Any]:
        """A hot standby of the server that has replayed the whole table, and the
        config reaching it: what a task restarted after its url failed over to a
        replica meets."""
        standby = self.replicas.enter_context(hot_standby(self.dsn))
        rows = len(table_ids(self.dsn, self.table))
        wait_for(lambda: standby.sees(self.table, rows), 60, "the replica to replay the table")
        return {**self.settings, "url": standby.dsn}

    def close(self) -> None:
        self.replicas.close()

    def _restart_server(self) -> bool:
        """Restarts the server once a task holds a session in it, which the restart then
        ends."""
        return self._sessions(end=False) and restart_postgres()


class PostgresCdcSubject(SourceSubject):
    """``postgres`` in ``mode: cdc`` under connector-defined transactions: a table of
    versioned rows inserted, updated, deleted and re-keyed while the snapshot and the
    stream are read. Its truth is tests/support/cdc.py's rule (each key's versions
    consecutive, ending at the table's final state). Its own fault terminates the
    replication connection. Midway, one transaction updates every row: many more
    records than ``maxRecordsPerTransaction``, so it is delivered in pieces, and faults
    can land between them. The rows there before make a snapshot of small chunks long
    enough for the kit's SIGKILLs to land inside it."""

    name = "postgres-cdc"
    connector = "postgres"
    tasks_max = 1
    boundary = "connector"
    takes_snapshot = True
    EXISTING_ROWS = 20000
    CHUNK = 50
    """A chunk is a Kafka transaction, which is what a snapshot's time is made of: at
    500 the snapshot was over about 0.3 s after its first commit, the kit's longest
    pause before a kill, and CI's run missed it; at 50 a kill a full second late still
    lands inside."""
    BOUND = 300
    """Records per Kafka transaction at most: the bulk update is several times that."""

    def __init__(self, dsn: str) -> None:
        self.dsn, self.table, self.slot = dsn, "", ""

    @classmethod
    def from_fixtures(cls, fixture: FixtureLookup) -> PostgresCdcSubject:
        return cls(fixture("postgres_dsn"))

    def config(self, workdir: Path, size: KitSize) -> dict[str, Any]:
        self.table, self.slot = f"cdc_{uuid.uuid4().hex[:8]}", f"t_{uuid.uuid4().hex[:10]}"
        create_table(self.dsn, self.table, self.EXISTING_ROWS)
        return {
            "url": self.dsn,
            "tables": [self.table],
            "slot": self.slot,
            "transactionsPerCommit": 25,
            "maxRecordsPerTransaction": self.BOUND,
            "batchSize": 500,
            "snapshotChunkSize": self.CHUNK,
        }

    def load(self, size: KitSize, bootstrap: str, topic: str) -> BackgroundWork:
        changes = size.records * 5
        pace_s = size.load_s / max(1, changes // PACE_EVERY)
        return Loader(
            self.dsn, self.table, self.EXISTING_ROWS, changes, pace_s, bulk_update_at=changes // 2
        )

    def audit(self, bootstrap: str, topic: str) -> KitAudit:
        """The change rule, and the bound: no Kafka transaction may hold more than
        BOUND records of one database transaction (the bulk update is several times
        that). An unbounded task delivers a huge transaction in one Kafka transaction,
        which the broker aborts on every restart once it outlasts the transaction
        timeout: a source stalled for good (eos-review 2026-11-27, hole 3)."""
        messages = read_change_messages(bootstrap, topic)
        changes = changes_of(messages)
        report = audit_changes(changes, final_versions(self.dsn, self.table))
        oversized = [
            f"txId {txid}: {size} of its records in one Kafka transaction, above "
            f"maxRecordsPerTransaction {self.BOUND}"
            for txid, size in largest_kafka_transactions(messages).items()
            if size > self.BOUND
        ]
        # The bound is proven only by a transaction that streamed more than it holds
        # (one whose rows a snapshot segment had already read is partly dropped).
        streamed = Counter(value["txId"] for _, value in changes if value["txId"])
        unproven = (
            []
            if any(count > self.BOUND for count in streamed.values())
            else [f"no database transaction of more than {self.BOUND} records streamed yet"]
        )
        return KitAudit(
            records=report.records,
            problems=report.problems + oversized,
            behind=report.behind + unproven,
        )

    def snapshot_underway(self, stored: Sequence[Mapping[str, Any]]) -> bool:
        """A task's offset names the snapshot's last row read until the snapshot ends."""
        return any("snapshot" in offset for offset in stored)

    def faults(self) -> list[SourceFault]:
        return [
            SourceFault("terminate the replication connection", self._terminate_stream),
            SourceFault("crash and restart PostgreSQL", self._crash_server),
        ]

    def _slot_streaming(self, conn: psycopg.Connection[Any], end: bool) -> bool:
        """Whether a task streams the slot; ``end``: and ends that backend."""
        what = "pg_terminate_backend(active_pid)" if end else "true"
        rows = conn.execute(
            f"SELECT {what} FROM pg_replication_slots"
            " WHERE slot_name = %s AND active_pid IS NOT NULL",
            (self.slot,),
        ).fetchall()
        return any(hit for (hit,) in rows)

    def _await_stream(self, end: bool, within_s: float = 30.0) -> bool:
        """A task restarted a moment ago may not hold its slot yet: looked for until it
        does."""
        deadline = time.monotonic() + within_s
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            while not self._slot_streaming(conn, end):
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.05)
        return True

    def _terminate_stream(self) -> bool:
        """Ends the backend streaming the slot (``pg_terminate_backend``)."""
        return self._await_stream(end=True)

    def _crash_server(self) -> bool:
        """Stops the server abruptly while a task streams (no shutdown checkpoint: the
        slot comes back at its last checkpointed position, which may be behind what
        the task confirmed) and starts it again."""
        streaming = self._await_stream(end=False)
        return restart_postgres("immediate") and streaming

    def close(self) -> None:
        drop_slot(self.dsn, self.slot)


class Mirrored(NamedTuple):
    """What a mirror must copy of a record besides its key."""

    value: bytes | None
    headers: object
    """As the consumer returns them: compared, never looked into."""
    timestamp: int


def _by_key(messages: Iterable[Message]) -> dict[str, list[Mirrored]]:
    records: dict[str, list[Mirrored]] = {}
    for m in messages:
        key = (m.key() or b"").decode()
        records.setdefault(key, []).append(Mirrored(m.value(), m.headers(), m.timestamp()[1]))
    return records


class KafkaMirrorSubject(IntervalBoundary):
    """``kafka``: an upstream topic of four partitions written in transactions, some
    aborted. Its truth is the upstream's ``read_committed`` records, each key's in its
    partition's order (a key lives in one partition on either side, while the output
    spreads an upstream partition's keys by their hash): copied once, in that order,
    with value, headers and timestamp. The restart moves partitions from three tasks to
    two."""

    name = "kafka"
    connector = "kafka"
    tasks_max = 3
    restart_tasks_max = 2
    STREAMS = 6

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap, self.upstream = bootstrap, ""

    @classmethod
    def from_fixtures(cls, fixture: FixtureLookup) -> KafkaMirrorSubject:
        return cls(fixture("kafka_bootstrap"))

    def config(self, workdir: Path, size: KitSize) -> dict[str, Any]:
        self.upstream = new_topic(self.bootstrap, "mirror-in", partitions=4)
        return {"topics": [self.upstream], "bootstrapServers": self.bootstrap, "batchSize": 50}

    def load(self, size: KitSize, bootstrap: str, topic: str) -> BackgroundWork:
        return UpstreamTransactions(
            self.bootstrap, self.upstream, self.STREAMS, size.records // 2, size.load_s
        )

    def audit(self, bootstrap: str, topic: str) -> KitAudit:
        delivered = _by_key(read_to_end(bootstrap, topic, timeout_s=60))
        truth = _by_key(read_to_end(self.bootstrap, self.upstream, timeout_s=60))
        return in_order_audit(delivered, truth)
