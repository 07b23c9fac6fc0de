"""The ``kafka`` connector against a real broker: a loader writes transactions (some
aborted) into a source topic while the mirror's tasks are SIGKILLed; every committed
record arrives once, in order per key, with its key, headers and timestamp, and no
record of an aborted transaction is ever mirrored.

Size comes from ONCEFLOW_CHAOS_KILLS (kills, default 20 in CI; halved here, the loader
runs for as long as they take) and ONCEFLOW_CHAOS_RECORDS (records per stream).
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from onceflow.eos.consume import read_to_end
from onceflow.logic.audit import AuditReport, audit_sequences
from onceflow.model.tasks import DesiredTasks
from tests.support.background import BackgroundWork
from tests.support.kafka import authenticated_listener, create_topic, new_topic
from tests.support.onceflow_run import start_run
from tests.support.tasks import TaskProcess, generation_settings, only_task, plan, write_generation
from tests.support.testbed import ROOT
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.kafka]

KILLS = max(4, int(os.environ.get("ONCEFLOW_CHAOS_KILLS", "20")) // 2)
RECORDS = int(os.environ.get("ONCEFLOW_CHAOS_RECORDS", "3000")) // 2
STREAMS = 6
TXN_RECORDS = 60
# Recent: the broker's time-based retention would delete older records mid-test.
BASE_TIMESTAMP_MS = int(time.time() * 1000) - 600_000


def _timestamp(stream: int, seq: int) -> int:
    return BASE_TIMESTAMP_MS + seq * 10 + stream


class Loader(BackgroundWork):
    """Transactions of TXN_RECORDS across the streams; every fourth one is aborted
    after writing poison records in it."""

    def __init__(self, bootstrap: str, topic: str, pace_s: float) -> None:
        super().__init__()
        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "transactional.id": f"loader-{uuid.uuid4().hex}"}
        )
        self.topic, self.pace_s = topic, pace_s
        self.aborted = 0

    def work(self) -> None:
        self.producer.init_transactions(30)
        pending = [(s, seq) for seq in range(1, RECORDS + 1) for s in range(STREAMS)]
        for number, start in enumerate(range(0, len(pending), TXN_RECORDS)):
            if number % 4 == 3:
                self.producer.begin_transaction()
                for s in range(STREAMS):
                    self._send("poison", s, 0)
                self.producer.flush(30)
                self.producer.abort_transaction(30)
                self.aborted += 1
            self.producer.begin_transaction()
            for s, seq in pending[start : start + TXN_RECORDS]:
                self._send(f"s{s}", s, seq)
            self.producer.commit_transaction(30)
            time.sleep(self.pace_s)

    def _send(self, stream: str, s: int, seq: int) -> None:
        self.producer.produce(
            self.topic,
            json.dumps({"stream": stream, "seq": seq}).encode(),
            stream.encode(),
            headers=[("seq", str(seq).encode()), ("empty", None)],
            timestamp=_timestamp(s, seq),
        )


def _output(bootstrap: str, topic: str) -> list[Message]:
    """The committed records of ``topic``; none before a task has created it."""
    try:
        return list(read_to_end(bootstrap, topic, timeout_s=60))
    except LookupError:
        return []


def _mirrored(bootstrap: str, topic: str) -> tuple[AuditReport, list[str]]:
    """The audit of the output, and every way a record differs from its source."""
    pairs: list[tuple[str, int]] = []
    wrong: list[str] = []
    for message in _output(bootstrap, topic):
        body: dict[str, Any] = json.loads(message.value() or b"null")
        stream, seq = str(body["stream"]), int(body["seq"])
        pairs.append((stream, seq))
        expected_headers = [("seq", str(seq).encode()), ("empty", None)]
        if message.key() != stream.encode():
            wrong.append(f"{stream}/{seq}: key {message.key()!r}")
        if message.headers() != expected_headers:
            wrong.append(f"{stream}/{seq}: headers {message.headers()!r}")
        if stream != "poison" and message.timestamp()[1] != _timestamp(int(stream[1:]), seq):
            wrong.append(f"{stream}/{seq}: timestamp {message.timestamp()}")
    report = audit_sequences(
        pairs, expect=RECORDS, expected_keys=[f"s{i}" for i in range(STREAMS)], key_count=STREAMS
    )
    return report, wrong


def _mirror(bootstrap: str, source_topic: str, tasks_max: int, **config: Any) -> DesiredTasks:
    return plan(
        bootstrap,
        connector="kafka",
        tasks_max=tasks_max,
        config={"topics": [source_topic], "bootstrapServers": bootstrap, **config},
    )


def test_sigkilled_mirror_tasks_copy_every_committed_record_once_and_no_aborted_one(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    source = new_topic(kafka_bootstrap, "mirror-in", partitions=4)
    desired = _mirror(kafka_bootstrap, source, tasks_max=3, batchSize=50)
    authority = tmp_path / "state.json"
    write_generation(authority, 1, desired.task_count, "enabled")
    tasks = [TaskProcess(s, tmp_path).start() for s in generation_settings(desired, 1, authority)]
    # Paced so the loader is still writing when the last kill lands (a kill round is
    # at most a second; the loader takes about twice as long as all of them).
    transactions = -(-STREAMS * RECORDS // TXN_RECORDS)
    loader = Loader(kafka_bootstrap, source, pace_s=2 * KILLS / transactions)
    loader.start()
    rng = random.Random(98)
    output = desired.source.spec.topic
    try:
        # Kills land on tasks that are copying, not on ones still starting up.
        wait_for(lambda: _output(kafka_bootstrap, output), 60, "the first mirrored records")
        for _ in range(KILLS):
            victim = rng.choice(tasks)
            time.sleep(rng.uniform(0.3, 1.0))  # fault timing, not synchronisation
            victim.kill()
            victim.start()
        assert loader.is_alive(), "every kill must land while records are still arriving"
        loader.join(300)
        assert loader.error is None, loader.error
        wait_for(
            lambda: _mirrored(kafka_bootstrap, output)[0].records >= STREAMS * RECORDS,
            240,
            "every committed record to be mirrored",
            interval_s=2,
        )
    finally:
        for task in tasks:
            if task.alive:
                task.terminate()
    report, wrong = _mirrored(kafka_bootstrap, output)
    assert report.ok, report
    assert report.records == STREAMS * RECORDS
    assert loader.aborted > 0 and not wrong, wrong[:10]


def test_keep_partition_writes_each_record_to_its_source_partition(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    source = new_topic(kafka_bootstrap, "mirror-keep", partitions=3)
    desired = _mirror(kafka_bootstrap, source, tasks_max=1, keepPartition=True)
    create_topic(kafka_bootstrap, desired.source.spec.topic, partitions=3)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for n in range(90):
        # Keyless, spread by hand: keyed output would otherwise follow the key's hash.
        producer.produce(source, json.dumps({"n": n}).encode(), partition=n % 3)
    producer.flush(30)
    task = TaskProcess(only_task(desired, tmp_path), tmp_path).start()
    try:
        wait_for(
            lambda: len(_output(kafka_bootstrap, desired.source.spec.topic)) >= 90,
            120,
            "the mirror to copy 90 records",
            interval_s=1,
        )
    finally:
        task.terminate()
    output = _output(kafka_bootstrap, desired.source.spec.topic)
    placed = {json.loads(m.value() or b"null")["n"]: m.partition() for m in output}
    assert len(output) == 90
    assert placed == {n: n % 3 for n in range(90)}


def test_the_source_clusters_credentials_come_from_the_connectors_secret(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """The test bed's SASL-over-TLS listener (on the node network, when the broker has
    it) as the source cluster: without its settings the mirror could not read at all."""
    node_bootstrap, client = authenticated_listener()
    source = new_topic(kafka_bootstrap, "mirror-auth", partitions=1)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for n in range(20):
        producer.produce(source, json.dumps({"stream": "s0", "seq": n + 1}).encode(), b"s0")
    producer.flush(30)
    desired = _mirror(kafka_bootstrap, source, tasks_max=1)
    secret_dir = tmp_path / "connector-secret"
    secret_dir.mkdir(mode=0o700)
    for key, value in client.items():
        (secret_dir / key).write_text(value)
    settings = only_task(desired, tmp_path)
    config = {**settings.connector_config, "bootstrapServers": node_bootstrap}
    settings = settings.model_copy(
        update={"connector_config": config, "connector_secret_dir": str(secret_dir)}
    )
    output = desired.source.spec.topic
    task = TaskProcess(settings, tmp_path).start()
    try:
        wait_for(
            lambda: len(_output(kafka_bootstrap, output)) >= 20,
            120,
            "the mirror to copy 20 records over SASL_SSL",
            interval_s=1,
        )
    finally:
        task.terminate()
    bodies = [json.loads(m.value() or b"null") for m in _output(kafka_bootstrap, output)]
    assert audit_sequences([(b["stream"], b["seq"]) for b in bodies], expect=20).ok


def test_an_unreachable_source_cluster_fails_the_task_naming_the_setting(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    desired = plan(
        kafka_bootstrap,
        connector="kafka",
        tasks_max=1,
        config={"topics": ["anything"], "bootstrapServers": "127.0.0.1:1"},
    )
    task = TaskProcess(only_task(desired, tmp_path), tmp_path).start()
    assert task.wait(120) != 0
    assert (
        "config.bootstrapServers: the source cluster at '127.0.0.1:1'" in task.log_path.read_text()
    )


def test_the_mirror_example_runs_with_onceflow_run(kafka_bootstrap: str, tmp_path: Path) -> None:
    """examples/kafka-mirror.yaml as a user runs it, its names made unique per run."""
    name = f"mirror-{uuid.uuid4().hex[:6]}"
    text = (ROOT / "examples" / "kafka-mirror.yaml").read_text()
    manifest = tmp_path / "kafka-mirror.yaml"
    manifest.write_text(
        text.replace("mirror-demo", name).replace("127.0.0.1:9092", kafka_bootstrap)
    )
    run = start_run(manifest, tmp_path, tmp_path / "run.log")

    def copied() -> AuditReport:
        pairs = [
            (str(b["stream"]), int(b["seq"]))
            for b in (
                json.loads(m.value() or b"null") for m in _output(kafka_bootstrap, f"{name}.copy")
            )
        ]
        return audit_sequences(pairs, expect=5000, expected_keys=["s0", "s1"])

    try:
        wait_for(lambda: copied().records >= 10_000, 180, "the mirror to copy both streams")
    finally:
        run.send_signal(signal.SIGTERM)
        run.wait(60)
    report = copied()
    assert report.ok, report


def _produce_at(bootstrap: str, topic: str, times_ms: list[int]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for n, at in enumerate(times_ms):
        producer.produce(
            topic, json.dumps({"stream": "s0", "seq": n + 1}).encode(), b"s0", timestamp=at
        )
    producer.flush(30)


def test_a_starting_timestamp_starts_partitions_never_mirrored_at_that_record(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Records 1..10 are older than the starting time, 11..20 not: a fixed point, so a
    task restarted before its first commit finds the same record (a "latest" end would
    have moved)."""
    source = new_topic(kafka_bootstrap, "mirror-time", partitions=1)
    _produce_at(kafka_bootstrap, source, [BASE_TIMESTAMP_MS + n for n in range(20)])
    desired = _mirror(
        kafka_bootstrap, source, tasks_max=1, startingTimestampMs=BASE_TIMESTAMP_MS + 10
    )
    task = TaskProcess(only_task(desired, tmp_path), tmp_path).start()
    output = desired.source.spec.topic
    try:
        wait_for(lambda: len(_output(kafka_bootstrap, output)) >= 10, 120, "10 records")
    finally:
        task.terminate()
    seqs = [json.loads(m.value() or b"null")["seq"] for m in _output(kafka_bootstrap, output)]
    assert seqs == list(range(11, 21))


def test_a_stored_offset_the_source_no_longer_has_stops_the_task_naming_it(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Retention deleted records the mirror had not copied: it says so instead of
    jumping to whatever the source still has."""
    source = new_topic(kafka_bootstrap, "mirror-gone", partitions=1)
    _produce_at(kafka_bootstrap, source, [BASE_TIMESTAMP_MS + n for n in range(10)])
    desired = _mirror(kafka_bootstrap, source, tasks_max=1)
    settings = only_task(desired, tmp_path)
    output = desired.source.spec.topic
    task = TaskProcess(settings, tmp_path).start()
    try:
        wait_for(lambda: len(_output(kafka_bootstrap, output)) >= 10, 120, "10 records")
    finally:
        stopped = task.terminate()
    assert stopped == 0
    _produce_at(kafka_bootstrap, source, [BASE_TIMESTAMP_MS + n for n in range(10, 30)])
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    (deleted,) = admin.delete_records([TopicPartition(source, 0, 20)]).values()
    deleted.result(30)
    restarted = TaskProcess(settings, tmp_path).start()
    assert restarted.wait(120) != 0
    assert f"reading {source}/0 at its stored offset failed" in restarted.log_path.read_text()
    assert len(_output(kafka_bootstrap, output)) == 10, "nothing after the gap was copied"
