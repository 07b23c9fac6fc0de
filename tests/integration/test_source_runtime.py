"""The source runtime against a real broker: fencing, boundaries, offsets recovery."""

from __future__ import annotations

import signal
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from onceflow.eos.audit_reader import read_sequences
from onceflow.eos.fencing import fence_transactional_ids
from onceflow.eos.offsets import (
    OffsetsCarryError,
    carry_offsets,
    ensure_offsets_topic,
    offset_key,
    offset_value,
    read_offsets,
)
from onceflow.eos.writer import TransactionalWriter
from onceflow.logic.audit import audit_sequences
from onceflow.runtime.task import ExitCode
from tests.support.kafka import drain, frozen_broker, new_topic
from tests.support.metrics import free_port, scrape
from tests.support.proc import signal_pending
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
    port = free_port()
    desired = plan(
        kafka_bootstrap, tasks_max=1, config={"streams": 2, "limit": 50, "batchSize": 10}
    )
    settings = only_task(desired, tmp_path)
    task = TaskProcess(settings.model_copy(update={"metrics_port": port}), tmp_path).start()
    try:
        wait_for(lambda: committed_offsets(desired) == {"s0": 50, "s1": 50}, 60, "100 records")
        metrics = scrape(port)
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


def test_offsets_the_broker_refuses_are_not_counted_as_carried(kafka_bootstrap: str) -> None:
    """A renamed offsets topic that refuses the copied records (here its
    max.message.bytes is below an offset's size; a missing WRITE ACL or a topic policy
    answers through the same delivery report) fails the copy, naming the topic and the
    broker's error: flush() alone saw nothing queued and the copy used to count as done,
    recording the old generation as fenced while the new one read an empty topic. Once
    the topic takes the record, the same copy lands."""
    owner = f"ns/carried-{uuid.uuid4().hex[:6]}"
    old, new = (f"offsets-{uuid.uuid4().hex[:8]}" for _ in range(2))
    ensure_offsets_topic(kafka_bootstrap, old)
    offset = {"path": "/data/in/" + "x" * 5000, "position": 42}
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    producer.produce(old, offset_value(offset), offset_key(owner, {"file": "a"}))
    assert producer.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    small = {"cleanup.policy": "compact", "max.message.bytes": "2000"}
    admin.create_topics([NewTopic(new, 1, 1, config=small)])[new].result(30)

    with pytest.raises(OffsetsCarryError, match=rf"copying offsets to '{new}': the broker refused"):
        carry_offsets(kafka_bootstrap, old, new, owner)
    assert read_offsets(kafka_bootstrap, new, owner).by_partition == {}

    room = ConfigEntry("max.message.bytes", "1048588", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ConfigResource.Type.TOPIC, new, incremental_configs=[room])
    admin.incremental_alter_configs([resource])[resource].result(30)

    def carried() -> bool:
        # The broker applies a topic's new config a moment after answering the change.
        try:
            return carry_offsets(kafka_bootstrap, old, new, owner) == 1
        except OffsetsCarryError:
            return False

    wait_for(carried, 30, f"the copy to {new} once its max.message.bytes has room")
    assert read_offsets(kafka_bootstrap, new, owner).offset({"file": "a"}) == offset


class _CommitsStalled:
    """True once the task's count of committed transactions has not moved for
    ``quiet_s``: while the broker answers, a task committing at every 10 ms poll moves
    it many times a second. Read from the metrics endpoint, whose thread answers while
    the task's main thread waits in a client call."""

    def __init__(self, port: int, quiet_s: float) -> None:
        self.port, self.quiet_s = port, quiet_s
        self.count: float | None = None
        self.since = time.monotonic()

    def committed(self) -> float:
        return scrape(self.port)["onceflow_source_transactions_committed_total"]

    def __call__(self) -> bool:
        count = self.committed()
        if count != self.count:
            self.count, self.since = count, time.monotonic()
        return time.monotonic() - self.since >= self.quiet_s


@pytest.mark.alone  # it freezes the broker
def test_sigterm_during_a_blocked_commit_stops_the_task_gracefully(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Issue 26, item 8: a task SIGTERMed while its ``commit_transaction`` was blocked
    ended in a ``SystemError`` and exit 1, because its signal handler ran inside the
    client call. The broker is frozen (SIGSTOP) so the commit blocks, the SIGTERM is
    taken while it does, and only then does the broker resume: the commit completes,
    the task stops on the request with exit 0 and nothing of the kind in its log, and
    what it committed is there exactly once. The broker is frozen for a few seconds
    only, and resumed whatever happens."""
    port = free_port()
    desired = plan(
        kafka_bootstrap, tasks_max=1, config={"streams": 1, "batchSize": 10, "pollIntervalMs": 10}
    )
    settings = only_task(desired, tmp_path).model_copy(update={"metrics_port": port})
    task = TaskProcess(settings, tmp_path).start()
    try:
        wait_for(lambda: committed_offsets(desired).get("s0", 0) > 0, 60, "a first commit")
        assert task.process is not None
        pid = task.process.pid
        stalled = _CommitsStalled(port, quiet_s=1.0)
        with frozen_broker():
            # Polls and sends never wait for the broker: a commit is the one call that
            # does, so a task that stopped committing sits in commit_transaction.
            wait_for(stalled, 20, "the task's commit to block on the frozen broker")
            task.signal(signal.SIGTERM)
            wait_for(
                lambda: not signal_pending(pid, signal.SIGTERM),
                10,
                "the task to take the SIGTERM while its commit is blocked",
            )
            assert task.alive, "the stop request must not cut the blocked commit short"
            assert stalled(), "the commit must still be blocked when the SIGTERM is taken"
        assert task.wait(90) == ExitCode.STOPPED, task.log_path.read_text()[-3000:]
    finally:
        if task.alive:
            task.kill()
    log = task.log_path.read_text()
    assert "SystemError" not in log, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    assert "SIGTERM received: stopping after the current call" in log, log[-3000:]
    assert task.progress[-1]["event"] == "exit", task.progress[-3:]
    assert task.progress[-1]["code"] == ExitCode.STOPPED, task.progress[-3:]

    last = committed_offsets(desired)["s0"]
    pairs, unparsable = read_sequences(
        kafka_bootstrap, desired.source.spec.topic, key_field="stream", seq_field="seq"
    )
    report = audit_sequences(pairs, expect=last, key_count=1, unparsable=unparsable)
    assert report.ok, report
