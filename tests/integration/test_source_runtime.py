"""The source runtime against a real broker: fencing, boundaries, offsets recovery."""

from __future__ import annotations

import socket
import threading
import urllib.request
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from onceflow.eos.audit_reader import read_sequences
from onceflow.eos.fencing import fence_transactional_ids
from onceflow.eos.offsets import ensure_offsets_topic, offset_key, offset_value, read_offsets
from onceflow.eos.writer import TransactionalWriter
from onceflow.logic.audit import audit_sequences
from onceflow.runtime.task import ExitCode
from tests.support.kafka import drain, new_topic
from tests.support.tasks import (
    TaskProcess,
    committed_offsets,
    only_task,
    plan,
)
from tests.support.waiting import wait_for

pytestmark = pytest.mark.kafka


def test_same_task_id_started_twice_fences_the_older_one(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    desired = plan(
        kafka_bootstrap,
        tasks_max=1,
        config={"streams": 2, "limit": 1500, "batchSize": 10, "pollIntervalMs": 10},
    )
    settings = only_task(desired, tmp_path)
    older = TaskProcess(settings, tmp_path).start()
    wait_for(lambda: len(committed_offsets(desired)) == 2, 60, "the first task to commit")

    newer = TaskProcess(settings, tmp_path).start()
    assert older.wait(60) == ExitCode.FENCED, "fenced while its generation is current: 75"
    wait_for(
        lambda: committed_offsets(desired) == {"s0": 1500, "s1": 1500},
        120,
        "the newer task to finish both streams",
    )
    assert newer.alive, "the newer task keeps running"
    assert newer.terminate() == ExitCode.STOPPED

    pairs, unparsable = read_sequences(
        kafka_bootstrap, desired.source.spec.topic, key_field="stream", seq_field="seq"
    )
    report = audit_sequences(pairs, expect=1500, key_count=2, unparsable=unparsable)
    assert report.ok, report


def test_interval_boundary_groups_many_polls_into_few_transactions(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    desired = plan(
        kafka_bootstrap,
        tasks_max=1,
        boundary="interval",
        interval_ms=500,
        config={"streams": 1, "limit": 300, "batchSize": 1, "pollIntervalMs": 10},
    )
    settings = only_task(desired, tmp_path)
    task = TaskProcess(settings, tmp_path).start()
    wait_for(lambda: committed_offsets(desired) == {"s0": 300}, 60, "all 300 records")
    task.terminate()
    final = task.progress[-2] if task.progress[-1]["event"] == "exit" else task.progress[-1]
    # 300 one-record polls take several seconds: the poll boundary would commit 300
    # one-record transactions; a 500 ms interval commits regularly, many polls each.
    assert final["records"] == 300
    assert final["transactions"] >= 3, "commits must happen during the run, not at the end"
    assert final["records"] / final["transactions"] >= 5, final


def test_reading_offsets_waits_for_an_open_transaction(kafka_bootstrap: str) -> None:
    topic = f"offsets-{uuid.uuid4().hex[:8]}"
    ensure_offsets_topic(kafka_bootstrap, topic)
    producer = Producer(
        {"bootstrap.servers": kafka_bootstrap, "transactional.id": f"t-{uuid.uuid4().hex}"}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, offset_value({"seq": 1}), offset_key("src", {"stream": "s0"}))
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, offset_value({"seq": 7}), offset_key("src", {"stream": "s0"}))
    producer.flush(30)

    with pytest.raises(TimeoutError, match=r"held by an open transaction(.|\n)*find-hanging"):
        read_offsets(kafka_bootstrap, topic, "src", timeout_s=2)

    result: dict[str, object] = {}
    reader = threading.Thread(
        target=lambda: result.update(read=read_offsets(kafka_bootstrap, topic, "src"))
    )
    reader.start()
    producer.commit_transaction(30)
    reader.join(60)
    stored = result["read"]
    assert stored.offset({"stream": "s0"}) == {"seq": 7}  # type: ignore[attr-defined]


def test_fencing_reports_each_id_and_says_what_is_wrong(kafka_bootstrap: str) -> None:
    ids = [f"fence-{uuid.uuid4().hex[:6]}-{i}" for i in range(5)]
    report = fence_transactional_ids(kafka_bootstrap, ids)
    assert report.ok
    assert [r.transactional_id for r in report.results] == ids

    unreachable = fence_transactional_ids("127.0.0.1:1", ids[:2], timeout_s=2)
    assert not unreachable.ok
    assert len(unreachable.failures) == 2
    assert "reachable" in unreachable.summary()


def test_task_exports_transaction_metrics(kafka_bootstrap: str, tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    desired = plan(
        kafka_bootstrap, tasks_max=1, config={"streams": 2, "limit": 50, "batchSize": 10}
    )
    settings = only_task(desired, tmp_path)
    task = TaskProcess(settings.model_copy(update={"metrics_port": port}), tmp_path).start()
    try:
        wait_for(lambda: committed_offsets(desired) == {"s0": 50, "s1": 50}, 60, "100 records")

        def scrape() -> dict[str, float]:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as page:
                text = page.read().decode()
            return {
                line.split("{")[0]: float(line.rsplit(" ", 1)[1])
                for line in text.splitlines()
                if line.startswith("onceflow_source_") and "{" in line
            }

        metrics = scrape()
        assert metrics["onceflow_source_records_committed_total"] == 100
        assert metrics["onceflow_source_transactions_committed_total"] == 10
        assert metrics["onceflow_source_transaction_size_max"] == 10
        assert metrics["onceflow_source_transaction_size_avg"] == 10
        assert metrics["onceflow_source_commit_latency_seconds_count"] == 10
    finally:
        task.terminate()


def test_a_timed_out_init_transactions_is_resumed_not_failed(kafka_bootstrap: str) -> None:
    """A task paused inside init_transactions (SIGSTOP, a frozen node) wakes up past the
    call's timeout; it must finish initialising and ask whether it was superseded."""
    topic = new_topic(kafka_bootstrap, "init-resume")
    writer = TransactionalWriter(kafka_bootstrap, f"resume-{uuid.uuid4().hex}")
    try:
        writer.initialize(timeout_s=0.001)  # every call times out before the broker answers
        writer.begin()
        writer.send(topic, b"k", b"after a resumed init")
        writer.commit()
    finally:
        writer.close()
    assert drain(kafka_bootstrap, topic, "read_committed") == [b"after a resumed init"]


def test_an_unsafe_offsets_topic_is_refused_before_anything_is_read(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """An offsets topic made by hand with two partitions (or without compaction) would
    let an older offset win or be deleted: the task names the topic and the fix, and
    exits with an error instead of producing."""
    desired = plan(kafka_bootstrap, tasks_max=1, config={"streams": 1, "limit": 10})
    settings = only_task(desired, tmp_path)
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(settings.offsets_topic, 2, 1)])[settings.offsets_topic].result(30)
    task = TaskProcess(settings, tmp_path).start()
    assert task.wait(60) == ExitCode.ERROR
    log = task.log_path.read_text()
    assert "it has 2 partitions" in log, log[-2000:]
    assert "cleanup.policy is 'delete'" in log, log[-2000:]
    assert "spec.offsetsTopic" in log
    assert drain(kafka_bootstrap, desired.source.spec.topic, "read_uncommitted", 1.0) == []


def test_a_new_offsets_topic_has_one_compacted_partition(kafka_bootstrap: str) -> None:
    topic = f"offsets-{uuid.uuid4().hex[:6]}"
    ensure_offsets_topic(kafka_bootstrap, topic)
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    metadata = admin.list_topics(topic, timeout=30).topics[topic]
    assert len(metadata.partitions) == 1
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(timeout=30)
    assert configs["cleanup.policy"].value == "compact"
