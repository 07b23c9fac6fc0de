"""Onceflow's `postgres` CDC source against Debezium's PostgreSQL connector on a Kafka
Connect worker with exactly-once source support, side by side in one run: the same
table, rows and workload, the same broker and database, the two interleaved (the
order flips each round, so drift over the run hits both alike).

Usage:

    make kafka-up postgres-up && bash scripts/debezium.sh up \\
        && .venv/bin/python benchmarks/vs_debezium.py

(`scripts/debezium.sh up` is `scripts/connect.sh up` with Debezium's connector, the
plugin archive Debezium publishes on Maven Central, in the same worker's plugin.path:
the worker serves vs_connect.py too.)

Each measurement, of either system, starts from scratch: a fresh table of
``--records`` rows (the same rows), a new slot, publication and topic
(``PARTITIONS`` partitions, created beforehand), one task. It then reports:

- snapshot rows/s: the initial snapshot, until every row is visible in Kafka;
- flood changes/s: ``--changes`` changes in transactions of 10 (3 inserts, 4
  updates of random rows, 3 deletes: the table keeps its size) from ``WRITERS``
  writer processes as fast as they go, each on keys of its own; the same seeded
  workload for both systems. A system that keeps up is bounded by the writers (their
  own rate is printed), and the writers by the cores the system leaves them: the
  latency then tells the two apart;
- backlog changes/s: as many changes again, written while the capture is paused
  (Onceflow's `spec.state: paused`, Connect's pause; checked: nothing of them is read
  meanwhile), then read after the resume as fast as the system goes, with the
  writers idle: its own streaming rate;
- commit -> visible latency, median over the flood's transactions: from the moment a
  writer's COMMIT returned until a ``read_committed`` consumer had every insert and
  update of that transaction (each row carries its transaction's tag in column
  ``txn``; deletes carry none);
- the same median at a calm rate, ``CALM_TPS`` transactions/s for ``--calm-seconds``.

Rates are the steady state (``_harness.steady``: from 10 % to 90 % of the records,
timed by when the consumer saw them), so neither a JVM's warm-up nor Python's imports
nor a connector's start count. A probe transaction per writer, seen before the flood
starts, makes sure each system is streaming by then. Each figure is the best of
``--rounds`` rounds (highest rate, lowest median).

Settings, chosen so that both do the same work under the same guarantees:

- Onceflow: `onceflow run` of a KafkaSource (a process of its own, as the worker is),
  `exactlyOnceSupport: required`, `transactionBoundary: poll`, connector `postgres`
  in mode `cdc`, `snapshot: initial`, `batchSize` its default (1000) or ``--batch-size``.
- Debezium (scripts/debezium.sh's worker has `exactly.once.source.support=enabled`):
  `exactly.once.support=required` and `transaction.boundary=poll`, the only boundary
  Debezium supports (its docs, configuration/eos.adoc); so Onceflow runs with `poll`
  too, not with its `connector` boundary. `plugin.name=pgoutput`, its own slot and
  publication (`publication.autocreate.mode=filtered`: this table only),
  `snapshot.mode=initial`, `max.batch.size` its default (2048) or ``--batch-size``
  (then transactions of the same size under `poll`; `max.queue.size` at least 8192,
  its default). Defaults by default: they are what a user runs, and a figure reached
  only by tuning is a default that is wrong.
  `tombstones.on.delete=false` (one record per change on both sides; a tombstone
  would be a second record per delete that Onceflow does not write).
- Output: both JSON without schemas. Onceflow writes its own layout; Debezium's
  JsonConverter with `schemas.enable=false` for key and value writes its envelope
  (`before`, `after`, `source`, `op`, `ts_*`), larger than Onceflow's by its `source`
  block: that is what Debezium writes, so it is kept (an unwrap transform would be
  work Debezium does not do by default). The mean record size of each is printed.
- Debezium's `poll.interval.ms` stays at its default (500 ms) unless
  ``--debezium-poll-ms`` says otherwise: its task waits up to that long for a full
  batch of `max.batch.size` before it hands what it has to the worker, so at a calm
  rate its latency is about that wait. Onceflow's task returns what has arrived.

Reported: for each round and system one line, then the best of each, and Onceflow /
Debezium for each figure (rates: higher is better; latencies: lower is better).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import multiprocessing
import os
import queue
import random
import re
import statistics
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from multiprocessing.process import BaseProcess
from typing import NamedTuple, Protocol

import psycopg
from _harness import ConnectRestError, OnceflowRun, connect_rest, onceflow_run, steady
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition
from psycopg.conninfo import conninfo_to_dict

from onceflow.eos.clients import admin_client
from onceflow.eos.topics import ensure_topic

SYSTEMS = ("onceflow", "debezium")
DEBEZIUM_CLASS = "io.debezium.connector.postgresql.PostgresConnector"
PARTITIONS = 3
WRITERS = 2
INSERTS, UPDATES, DELETES = 3, 4, 3
PER_TRANSACTION = INSERTS + UPDATES + DELETES
CALM_TPS = 50
PAYLOAD, UPDATED = "x" * 100, "y" * 100
STALL_S = 120.0
"""A wait gives up when nothing new became visible for this long."""
QUIET_S = 3.0
"""After the last phase: how long to watch for records beyond those expected."""
TAG = re.compile(rb'"txn":(\d+)')

PAUSE_S = 2.0
"""How long a pause is given to take hold before the backlog is written (Onceflow's
tasks read their state every 250 ms; Connect's pause is asynchronous too)."""


class Capture(Protocol):
    """The system under test, as the workload drives it."""

    def alive(self) -> None:
        """Raises when the system has failed."""

    def pause(self) -> None: ...

    def resume(self) -> None: ...


class Burst(NamedTuple):
    commits: dict[int, float]
    """Commit time (epoch seconds) of each transaction, by its tag."""
    changes: int
    rate: float
    """Changes/s the writers committed, from their start to their last commit."""


def _write(
    dsn: str,
    table: str,
    rows: int,
    index: int,
    seed: int,
    commands: multiprocessing.Queue[tuple[int, int, float] | None],
    results: multiprocessing.Queue[tuple[int, float, dict[int, float]] | None],
) -> None:
    """Writer ``index`` (a process of its own): for each command (first tag,
    transactions, transactions/s or 0 for as fast as it goes) it writes that many
    transactions to its own keys (ids ``index`` modulo WRITERS) and puts their commit
    times. Deletes take its oldest rows, updates random ones, inserts new ids."""
    rng = random.Random(seed * WRITERS + index)
    live = list(range(index, rows, WRITERS))
    head = 0
    fresh = rows + index
    insert = f"INSERT INTO {table} (id, txn, payload) SELECT unnest(%s::bigint[]), %s, %s"
    update = f"UPDATE {table} SET txn = %s, payload = %s WHERE id = ANY(%s)"
    delete = f"DELETE FROM {table} WHERE id = ANY(%s)"
    with psycopg.connect(dsn) as conn:
        results.put(None)  # ready
        while (command := commands.get()) is not None:
            first, count, per_s = command
            started = time.time()
            commits: dict[int, float] = {}
            for k in range(count):
                if per_s and (pause := started + k / per_s - time.time()) > 0:
                    time.sleep(pause)
                gone = live[head : head + DELETES]
                head += DELETES
                changed = [live[i] for i in rng.sample(range(head, len(live)), UPDATES)]
                new = list(range(fresh, fresh + INSERTS * WRITERS, WRITERS))
                fresh += INSERTS * WRITERS
                live += new
                # One round trip: the statements and the COMMIT are sent together, and
                # leaving the pipeline waits for all their results.
                with conn.pipeline(), conn.transaction():
                    conn.execute(insert, (new, first + k, PAYLOAD))
                    conn.execute(update, (first + k, UPDATED, changed))
                    conn.execute(delete, (gone,))
                commits[first + k] = time.time()
                if head > len(live) // 2:
                    del live[:head]
                    head = 0
            results.put((index, started, commits))


class Writers:
    """WRITERS writer processes on ``table``, started (and connected) before the
    system under test, so their start-up costs it nothing; the same ``seed`` gives the
    same changes."""

    def __init__(self, dsn: str, table: str, rows: int, seed: int) -> None:
        context = multiprocessing.get_context("spawn")
        self.results: multiprocessing.Queue[tuple[int, float, dict[int, float]] | None] = (
            context.Queue()
        )
        self.commands: list[multiprocessing.Queue[tuple[int, int, float] | None]] = [
            context.Queue() for _ in range(WRITERS)
        ]
        self.processes: list[BaseProcess] = [
            context.Process(
                target=_write,
                args=(dsn, table, rows, i, seed, self.commands[i], self.results),
                daemon=True,
            )
            for i in range(WRITERS)
        ]
        for process in self.processes:
            process.start()
        for _ in self.processes:
            self._result()

    def _result(self) -> tuple[int, float, dict[int, float]] | None:
        while True:
            try:
                return self.results.get(timeout=1)
            except queue.Empty:
                if dead := [p for p in self.processes if p.exitcode is not None]:
                    raise RuntimeError(f"writer exited ({dead[0].exitcode})") from None

    def run(self, first_tag: int, transactions: int, per_s: float = 0) -> Burst:
        """``transactions`` (split among the writers, tags from ``first_tag`` on) at
        ``per_s`` transactions/s in all, or as fast as they go; returns when done."""
        each = transactions // WRITERS
        for i, commands in enumerate(self.commands):
            commands.put((first_tag + i * each, each, per_s / WRITERS))
        commits: dict[int, float] = {}
        starts = []
        for _ in self.commands:
            answer = self._result()
            assert answer is not None
            commits.update(answer[2])
            starts.append(answer[1])
        changes = len(commits) * PER_TRANSACTION
        return Burst(commits, changes, changes / (max(commits.values()) - min(starts)))

    def close(self) -> None:
        for commands in self.commands:
            commands.put(None)
        for process in self.processes:
            process.join(30)
            if process.exitcode is None:
                process.terminate()


class Watcher:
    """A ``read_committed`` consumer of ``topic`` from its start, in a thread of its
    own: (time, records seen) after each fetch, and once ``tags`` is set, when the last
    record carrying each transaction tag was seen (an insert's or update's row,
    ``after``, in either system's layout)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"vs-debezium-{uuid.uuid4().hex}",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                # An idle fetch returns after 10 ms: the latencies' resolution.
                "fetch.wait.max.ms": 10,
                "log_level": 4,
            }
        )
        partitions = self.consumer.list_topics(topic, timeout=30).topics[topic].partitions
        self.consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        self.count = self.bytes = 0
        self.samples: list[tuple[float, int]] = []
        self.seen: dict[int, float] = {}
        self.tags = False
        self.failure: BaseException | None = None
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            while not self.stopping.is_set():
                messages = self.consumer.consume(500, 0.05)
                if not messages:
                    continue
                now = time.time()
                count, size = 0, 0
                for message in messages:
                    if message.error() is not None:
                        continue
                    count += 1
                    value = message.value() or b""
                    size += len(value) + len(message.key() or b"")
                    at = value.find(b'"after":{') if self.tags else -1
                    if at >= 0 and (found := TAG.search(value, at)):
                        self.seen[int(found.group(1))] = now
                self.count += count
                self.bytes += size
                self.samples.append((now, self.count))
        except BaseException as error:
            self.failure = error

    def wait_for(self, records: int, alive: Callable[[], None]) -> None:
        """Until ``records`` are visible; raises when the system failed or nothing new
        became visible for STALL_S."""
        last, grew, checked = -1, time.monotonic(), 0.0
        while self.count < records:
            now = time.monotonic()
            if self.failure is not None:
                raise RuntimeError(f"{self.topic}: the consumer failed") from self.failure
            if self.count != last:
                last, grew = self.count, now
            elif now - grew > STALL_S:
                raise TimeoutError(f"{self.topic}: stuck at {self.count} records of {records}")
            if now - checked >= 2:
                alive()
                checked = now
            time.sleep(0.02)

    def latency(self, burst: Burst) -> float:
        """Median commit -> visible seconds over ``burst``'s transactions."""
        seen = dict(self.seen)
        if missing := burst.commits.keys() - seen.keys():
            raise RuntimeError(f"{self.topic}: {len(missing)} transactions never seen")
        return statistics.median(seen[tag] - at for tag, at in burst.commits.items())

    def close(self) -> None:
        self.stopping.set()
        self.thread.join(10)
        self.consumer.close()


class Result(NamedTuple):
    snapshot: float
    drain: float
    """Changes/s reading the backlog."""
    stream: float
    """Changes/s delivered during the flood (at most the writers' rate)."""
    writers: float
    flood: float
    calm: float
    record_bytes: float
    extra: int

    def line(self) -> str:
        return (
            f"snapshot {self.snapshot:,.0f} rows/s, backlog {self.drain:,.0f} changes/s, "
            f"flood {self.stream:,.0f} changes/s (writers {self.writers:,.0f}/s), latency p50 "
            f"flood {self.flood:.3f} s, calm {self.calm:.3f} s, {self.record_bytes:.0f} B a record"
            + (f", {self.extra} records more than changes!" if self.extra else "")
        )


def best(results: list[Result]) -> Result:
    return Result(
        max(r.snapshot for r in results),
        max(r.drain for r in results),
        max(r.stream for r in results),
        max(r.writers for r in results),
        min(r.flood for r in results),
        min(r.calm for r in results),
        results[-1].record_bytes,
        max(r.extra for r in results),
    )


def load_table(dsn: str, table: str, rows: int) -> None:
    """``rows`` rows (ids 0..rows-1, tag 0), vacuumed and checkpointed, so each
    system's snapshot reads the same clean table and no checkpoint is due."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            f"CREATE TABLE {table} (id bigint PRIMARY KEY, txn bigint NOT NULL, "
            "payload text NOT NULL)"
        )
        with conn.cursor().copy(f"COPY {table} (id, txn, payload) FROM STDIN") as copy:
            for i in range(rows):
                copy.write_row((i, 0, PAYLOAD))
        conn.execute(f"VACUUM ANALYZE {table}")
        conn.execute("CHECKPOINT")


def drop_capture(dsn: str, slot: str, publication: str) -> None:
    """Drops the slot once its reader let go of it (after 30 s, the reader is ended),
    and the publication."""
    deadline = time.monotonic() + 30
    with psycopg.connect(dsn, autocommit=True) as conn:
        while row := conn.execute(
            "SELECT active_pid FROM pg_replication_slots WHERE slot_name = %s", (slot,)
        ).fetchone():
            if row[0] is None:
                with contextlib.suppress(psycopg.errors.ObjectInUse):
                    conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
                    break
            elif time.monotonic() > deadline:
                conn.execute("SELECT pg_terminate_backend(%s)", (row[0],))
            time.sleep(0.2)
        conn.execute(f"DROP PUBLICATION IF EXISTS {publication}")


@contextlib.contextmanager
def onceflow_capture(
    args: argparse.Namespace, name: str, table: str, topic: str, slot: str
) -> Iterator[Capture]:
    source = {
        "topic": topic,
        "tasksMax": 1,
        "exactlyOnceSupport": "required",
        "transactionBoundary": "poll",
        "connector": {
            "type": "postgres",
            "config": {
                "mode": "cdc",
                "url": args.dsn,
                "tables": [f"public.{table}"],
                "slot": slot,
                "publication": slot,
                "snapshot": "initial",
                **({} if args.batch_size is None else {"batchSize": args.batch_size}),
            },
        },
    }
    try:
        with onceflow_run(args.bootstrap, name, source) as run:
            yield OnceflowCapture(run)
    finally:
        drop_capture(args.dsn, slot, slot)


class OnceflowCapture:
    def __init__(self, run: OnceflowRun) -> None:
        self.run = run

    def alive(self) -> None:
        if self.run.process.poll() is not None:
            raise RuntimeError(f"onceflow run exited ({self.run.process.returncode})")

    def pause(self) -> None:
        self.run.state("paused")

    def resume(self) -> None:
        self.run.state("running")


def debezium_config(args: argparse.Namespace, prefix: str, table: str, slot: str) -> dict[str, str]:
    database = conninfo_to_dict(args.dsn)
    config = {
        "connector.class": DEBEZIUM_CLASS,
        "tasks.max": "1",
        "exactly.once.support": "required",
        "transaction.boundary": "poll",
        "database.hostname": str(database.get("host") or "127.0.0.1"),
        "database.port": str(database.get("port") or 5432),
        "database.user": str(database.get("user") or "postgres"),
        "database.dbname": str(database.get("dbname") or "postgres"),
        "topic.prefix": prefix,
        "plugin.name": "pgoutput",
        "slot.name": slot,
        "publication.name": slot,
        "publication.autocreate.mode": "filtered",
        "table.include.list": f"public\\.{table}",
        "snapshot.mode": "initial",
        "tombstones.on.delete": "false",
        **(
            {}
            if args.batch_size is None
            else {
                "max.batch.size": str(args.batch_size),
                "max.queue.size": str(max(8192, 4 * args.batch_size)),
            }
        ),
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "false",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
    }
    if database.get("password"):
        config["database.password"] = str(database["password"])
    if args.debezium_poll_ms is not None:
        config["poll.interval.ms"] = str(args.debezium_poll_ms)
    return config


@contextlib.contextmanager
def debezium_capture(
    args: argparse.Namespace, name: str, prefix: str, table: str, slot: str
) -> Iterator[Capture]:
    connectors = f"{args.worker}/connectors"
    config = debezium_config(args, prefix, table, slot)
    try:
        connect_rest(connectors, "POST", {"name": name, "config": config})
        try:
            yield DebeziumCapture(f"{connectors}/{name}")
        finally:
            connect_rest(f"{connectors}/{name}", "DELETE")
    finally:
        drop_capture(args.dsn, slot, slot)


class DebeziumCapture:
    def __init__(self, connector: str) -> None:
        self.connector = connector

    def alive(self) -> None:
        try:
            status = connect_rest(f"{self.connector}/status")
        except ConnectRestError as error:
            if error.status == 404:  # not started yet
                return
            raise
        for part in [status["connector"], *status.get("tasks", [])]:
            if part.get("state") == "FAILED":
                raise RuntimeError(f"Debezium failed: {part.get('trace', '')[:3000]}")

    def pause(self) -> None:
        connect_rest(f"{self.connector}/pause", "PUT")

    def resume(self) -> None:
        connect_rest(f"{self.connector}/resume", "PUT")


def workload(
    args: argparse.Namespace, writers: Writers, watcher: Watcher, capture: Capture
) -> Result:
    alive = capture.alive
    rows = args.records
    watcher.wait_for(rows, alive)
    snapshot = steady(list(watcher.samples), 0, rows)
    watcher.tags = True
    tag = 1
    probe = writers.run(tag, WRITERS)  # a transaction each: the stream is flowing
    tag += len(probe.commits)
    expected = rows + probe.changes
    watcher.wait_for(expected, alive)
    flood = writers.run(tag, args.changes // PER_TRANSACTION)
    tag += len(flood.commits)
    watcher.wait_for(expected + flood.changes, alive)
    stream = steady(list(watcher.samples), expected, expected + flood.changes)
    expected += flood.changes
    # The backlog: the same number of changes written while the capture is paused,
    # then read as fast as the system goes, with nothing else on the machine's cores.
    capture.pause()
    time.sleep(PAUSE_S)
    backlog = writers.run(tag, args.changes // PER_TRANSACTION)
    tag += len(backlog.commits)
    time.sleep(PAUSE_S)
    if watcher.count != expected:
        raise RuntimeError(
            f"{watcher.topic}: {watcher.count - expected} changes were read while paused"
        )
    capture.resume()
    watcher.wait_for(expected + backlog.changes, alive)
    drain = steady(list(watcher.samples), expected, expected + backlog.changes)
    expected += backlog.changes
    calm = writers.run(tag, CALM_TPS * args.calm_seconds, CALM_TPS)
    expected += calm.changes
    watcher.wait_for(expected, alive)
    time.sleep(QUIET_S)
    return Result(
        snapshot,
        drain,
        stream,
        flood.rate,
        watcher.latency(flood),
        watcher.latency(calm),
        watcher.bytes / watcher.count,
        watcher.count - expected,
    )


def measure(args: argparse.Namespace, run: str, round_: int, system: str) -> Result:
    """One system, from scratch: a fresh table of the same rows, its own capture."""
    table = f"vs_{run}_{round_}{system[0]}"
    slot = f"{table}_{system}"
    name = f"vs-{run}-{round_}"
    if system == "onceflow":
        topic = f"{name}.out"
        capture = onceflow_capture(args, name, table, topic, slot)
    else:
        prefix = f"vsdbz{run}{round_}"
        topic = f"{prefix}.public.{table}"
        capture = debezium_capture(args, name, prefix, table, slot)
    load_table(args.dsn, table, args.records)
    try:
        ensure_topic(args.bootstrap, topic, partitions=PARTITIONS)
        writers = Writers(args.dsn, table, args.records, seed=round_)
        try:
            watcher = Watcher(args.bootstrap, topic)
            try:
                with capture as under_test:
                    return workload(args, writers, watcher, under_test)
            finally:
                watcher.close()
        finally:
            writers.close()
    finally:
        with psycopg.connect(args.dsn, autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {table}")
        with contextlib.suppress(KafkaException):  # only to save the broker's disk
            admin_client(args.bootstrap).delete_topics([topic])[topic].result(30)


def debezium_version(worker: str) -> str:
    try:
        plugins = connect_rest(f"{worker}/connector-plugins")
    except OSError as error:
        raise SystemExit(
            f"no Connect worker at {worker} ({error}): bash scripts/debezium.sh up"
        ) from None
    for plugin in plugins:
        if plugin["class"] == DEBEZIUM_CLASS:
            return str(plugin.get("version", "?"))
    raise SystemExit(f"{worker} has no {DEBEZIUM_CLASS}: run bash scripts/debezium.sh up")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--dsn", default="postgresql://onceflow@127.0.0.1:15432/postgres")
    parser.add_argument("--worker", default="http://127.0.0.1:18083")
    parser.add_argument("--records", type=int, default=200_000, help="rows to snapshot")
    parser.add_argument("--changes", type=int, default=100_000, help="changes in the flood")
    parser.add_argument("--calm-seconds", type=int, default=20, help="of the calm workload")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved runs of each")
    parser.add_argument(
        "--batch-size",
        type=int,
        help="records per poll for both, Onceflow's batchSize and Debezium's max.batch.size "
        "(default: each its own default, 1000 and 2048: what a user runs)",
    )
    parser.add_argument(
        "--debezium-poll-ms",
        type=int,
        help="Debezium's poll.interval.ms (default: Debezium's own, 500)",
    )
    args = parser.parse_args()
    if args.records < 100 * WRITERS:
        parser.error(f"--records: at least {100 * WRITERS}")
    if args.changes < 10 * PER_TRANSACTION * WRITERS:
        parser.error(f"--changes: at least {10 * PER_TRANSACTION * WRITERS}")
    version = debezium_version(args.worker)
    poll_ms = "default" if args.debezium_poll_ms is None else args.debezium_poll_ms
    run = uuid.uuid4().hex[:6]
    print(
        f"{datetime.date.today()}, {os.cpu_count()} cores; Debezium {version}; "
        f"{args.records:,} rows; flood of {args.changes:,} changes in transactions of "
        f"{PER_TRANSACTION} from {WRITERS} writers; calm {CALM_TPS} transactions/s for "
        f"{args.calm_seconds} s; {PARTITIONS} partitions; batch "
        f"{args.batch_size or 'defaults'}; poll boundary; Debezium poll.interval.ms {poll_ms}"
    )
    results: dict[str, list[Result]] = {system: [] for system in SYSTEMS}
    for round_ in range(args.rounds):
        for system in SYSTEMS if round_ % 2 == 0 else SYSTEMS[::-1]:
            result = measure(args, run, round_, system)
            results[system].append(result)
            print(f"round {round_ + 1} {system:<8}: {result.line()}", flush=True)
    ours, theirs = best(results["onceflow"]), best(results["debezium"])
    print(f"{f'best of {args.rounds}':<16} {'onceflow':>12} {'debezium':>12} {'ratio':>6}")
    for label, a, b, form in [
        ("snapshot rows/s", ours.snapshot, theirs.snapshot, ",.0f"),
        ("backlog changes/s", ours.drain, theirs.drain, ",.0f"),
        ("flood changes/s", ours.stream, theirs.stream, ",.0f"),
        ("flood p50 s", ours.flood, theirs.flood, ".3f"),
        ("calm p50 s", ours.calm, theirs.calm, ".3f"),
    ]:
        print(f"{label:<16} {a:>12{form}} {b:>12{form}} {a / b:>6.2f}")


if __name__ == "__main__":
    main()
