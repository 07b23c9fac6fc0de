"""The ``kafka`` connector against a real broker: partitions kept, the source cluster's
credentials, an unreachable source cluster, a starting timestamp, a stored offset the
source no longer has, and the example as a user runs it. (A loader's transactions,
some aborted, mirrored once in order through SIGKILLs and a generation change are the
source conformance kit's, tests/conformance.)
"""

from __future__ import annotations

import json
import signal
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from onceflow.api.connector import SourceOffset, SourcePartition, TaskContext
from onceflow.connectors.kafka_mirror import KafkaMirrorConnector, KafkaMirrorTask
from onceflow.eos.consume import read_to_end
from onceflow.logic.audit import AuditReport, audit_sequences
from onceflow.model.tasks import DesiredTasks
from tests.e2e.test_run_states import _offsets_cli, _with_change, _with_state
from tests.support.kafka import authenticated_listener, create_topic, new_topic
from tests.support.onceflow_run import pipeline_with_source, start_run
from tests.support.tasks import TaskProcess, only_task, plan
from tests.support.testbed import ROOT
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.kafka]

# Recent: the broker's time-based retention would delete older records mid-test.
BASE_TIMESTAMP_MS = int(time.time() * 1000) - 600_000


def _output(bootstrap: str, topic: str) -> list[Message]:
    """The committed records of ``topic``; none before a task has created it."""
    try:
        return list(read_to_end(bootstrap, topic, timeout_s=60))
    except LookupError:
        return []


def _mirror(bootstrap: str, source_topic: str, tasks_max: int, **config: Any) -> DesiredTasks:
    return plan(
        bootstrap,
        connector="kafka",
        tasks_max=tasks_max,
        config={"topics": [source_topic], "bootstrapServers": bootstrap, **config},
    )


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


class _NothingStored:
    def offset(self, partition: SourcePartition) -> SourceOffset | None:
        return None


def test_a_task_says_how_many_records_it_has_not_copied_yet(kafka_bootstrap: str) -> None:
    """The lag gauge's measure, from the end offsets its fetches brought back."""
    source = new_topic(kafka_bootstrap, "mirror-lag", partitions=1)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for n in range(50):
        producer.produce(source, json.dumps({"n": n}).encode())
    producer.flush(30)
    config = {"topics": [source], "bootstrapServers": kafka_bootstrap, "batchSize": 10}
    task = KafkaMirrorTask()
    planned = KafkaMirrorConnector().task_configs(config, 1)[0]
    task.start(TaskContext(task_id=0, config=planned, offsets=_NothingStored()))
    try:
        assert task.behind() is None, "nothing fetched yet"
        copied: list[object] = []
        wait_for(lambda: bool(copied.extend(task.poll()) or copied), 30, "a first batch")
        behind = task.behind()
        assert behind is not None and behind.records == 50 - len(copied), (behind, len(copied))
    finally:
        task.stop()


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


def test_a_stopped_mirror_set_to_a_timestamp_copies_again_from_the_first_record_at_it(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """KIP-875's alter for the mirror: its listed partition (the source cluster's id,
    topic, partition) set to {timestamp}, found by the task when it resumes."""
    source = new_topic(kafka_bootstrap, "mirror-alter", partitions=1)
    _produce_at(kafka_bootstrap, source, [BASE_TIMESTAMP_MS + n * 1000 for n in range(40)])
    name = f"malter-{uuid.uuid4().hex[:6]}"
    documents = pipeline_with_source(
        kafka_bootstrap,
        name,
        "counter",
        {
            "topic": f"{name}.copy",
            "connector": {
                "type": "kafka",
                "config": {"topics": [source], "bootstrapServers": kafka_bootstrap},
            },
        },
    )
    manifest, state = tmp_path / "mirror.yaml", tmp_path / "state"
    manifest.write_text(yaml.safe_dump_all(documents))
    log = tmp_path / "run.log"
    run = start_run(manifest, state, log)
    try:
        wait_for(lambda: len(_output(kafka_bootstrap, f"{name}.copy")) >= 40, 120, "the copy")
        stopped = _with_state(manifest.read_text(), "KafkaSource", "stopped")
        manifest.write_text(stopped)
        wait_for(lambda: "counter: stopped; offsets kept" in log.read_text(), 60, "stopped")
        listed = _offsets_cli(
            "list", "--source", "counter", "-f", str(manifest), "--state-dir", str(state)
        )
        (entry,) = yaml.safe_load(listed.stdout)
        assert entry["offset"] == {"offset": 40}, entry
        entry["offset"] = {"timestamp": BASE_TIMESTAMP_MS + 20 * 1000}  # record 21's
        manifest.write_text(_with_change(stopped, {"id": "from-21", "offsets": [entry]}))
        wait_for(lambda: "offsets change from-21 applied" in log.read_text(), 60, "applied")
        manifest.write_text(_with_state(manifest.read_text(), "KafkaSource", "running"))
        wait_for(lambda: len(_output(kafka_bootstrap, f"{name}.copy")) >= 60, 120, "the replay")
    finally:
        run.send_signal(signal.SIGINT)
        assert run.wait(60) == 0
    copied = [
        json.loads(m.value() or b"null")["seq"] for m in _output(kafka_bootstrap, f"{name}.copy")
    ]
    assert copied == [*range(1, 41), *range(21, 41)]
