"""Exactly-once at the edges of a source task's life, against a real broker: resuming
after aborted offsets, stopping mid connector-defined transaction, KIP-618's abort."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from onceflow.api.connector import SourceRecord
from onceflow.api.task import TaskSettings
from onceflow.eos.audit_reader import read_sequences
from onceflow.eos.offsets import ensure_offsets_topic, offset_key
from onceflow.eos.topics import ensure_topic
from onceflow.eos.writer import TransactionalWriter
from onceflow.logic.audit import audit_sequences
from onceflow.runtime.task import ExitCode
from tests.support.kafka import drain
from tests.support.tasks import (
    TaskProcess,
    committed_offsets,
    generation_settings,
    only_task,
    plan,
    write_generation,
)
from tests.support.waiting import wait_for

pytestmark = pytest.mark.kafka


def _seq_record(seq: int) -> SourceRecord:
    return SourceRecord(
        source_partition={"stream": "s0"},
        source_offset={"seq": seq},
        key=b"s0",
        value=json.dumps({"stream": "s0", "seq": seq}).encode(),
    )


def _with_config(settings: TaskSettings, **changes: object) -> TaskSettings:
    config = {**settings.connector_config, **changes}
    return settings.model_copy(update={"connector_config": config})


def _committed_seqs(bootstrap: str, topic: str) -> list[int]:
    return [json.loads(v)["seq"] for v in drain(bootstrap, topic, "read_committed", quiet_s=0.5)]


def test_disabled_task_never_resumes_from_an_aborted_offset(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """An enabled era left an aborted transaction with records 11..20 and offset 20
    (a task fenced or killed mid-commit); the disabled successor must resume at 11."""
    desired = plan(
        kafka_bootstrap,
        mode="disabled",
        tasks_max=1,
        config={"streams": 1, "limit": 30, "batchSize": 5},
    )
    s = only_task(desired, tmp_path)
    ensure_topic(kafka_bootstrap, s.topic)
    ensure_offsets_topic(kafka_bootstrap, s.offsets_topic)
    writer = TransactionalWriter(kafka_bootstrap, f"{s.source}-enabled-era")
    writer.initialize()
    key = offset_key(s.source, {"stream": "s0"})
    for first, last, finish in ((1, 10, writer.commit), (11, 20, writer.abort)):
        writer.begin()
        for seq in range(first, last + 1):
            writer.send_records([_seq_record(seq)], s.topic)
        writer.send_offsets(s.offsets_topic, s.source, {key: ({"stream": "s0"}, {"seq": last})})
        writer.producer.flush(30)  # on the broker before the abort, as in a real commit
        finish()
    writer.close()

    task = TaskProcess(s, tmp_path).start()
    wait_for(lambda: committed_offsets(desired) == {"s0": 30}, 60, "the task to reach 30")
    assert task.terminate() == ExitCode.STOPPED
    pairs, unparsable = read_sequences(
        kafka_bootstrap, s.topic, key_field="stream", seq_field="seq"
    )
    report = audit_sequences(pairs, expect=30, expected_keys=["s0"], unparsable=unparsable)
    assert report.missing == 0, report


def test_graceful_stop_aborts_a_connector_transaction_the_connector_did_not_end(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Records 4 and 5 of group 1 (records 4..6) are in the open transaction when the
    task is stopped: committing them with offset {group: 1} would make a restart resume
    at record 7 and lose record 6."""
    desired = plan(
        kafka_bootstrap,
        tasks_max=1,
        boundary="connector",
        connector="tests.support.connectors:GroupsOfThreeConnector",
        config={"streams": 1, "stallAfter": 5},
    )
    settings = only_task(desired, tmp_path)
    task = TaskProcess(settings, tmp_path).start()
    topic = desired.source.spec.topic
    wait_for(
        lambda: len(drain(kafka_bootstrap, topic, "read_uncommitted", quiet_s=0.5)) == 5,
        60,
        "records 4 and 5 written inside the open transaction",
    )
    assert task.terminate() == ExitCode.STOPPED
    assert _committed_seqs(kafka_bootstrap, topic) == [1, 2, 3], (
        "only the group the connector committed is visible"
    )

    restarted = TaskProcess(_with_config(settings, stallAfter=9), tmp_path).start()
    wait_for(
        lambda: _committed_seqs(kafka_bootstrap, topic) == list(range(1, 10)),
        60,
        "the restarted task to redo group 1 and commit groups 1 and 2",
    )
    assert restarted.terminate() == ExitCode.STOPPED


def test_connector_abort_commits_the_offsets_of_the_dropped_records(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """KIP-618: after an abort the dropped records' offsets are committed anyway, so a
    restarted task does not bring back what the connector chose to drop."""
    desired = plan(
        kafka_bootstrap,
        tasks_max=1,
        boundary="connector",
        connector="tests.support.connectors:AbortSecondBatchConnector",
        config={"streams": 1, "limit": 10, "batchSize": 5},
    )
    settings = only_task(desired, tmp_path)
    task = TaskProcess(settings, tmp_path).start()
    wait_for(lambda: committed_offsets(desired) == {"s0": 10}, 60, "the abort's offsets")
    task.kill()
    # Restarted with room for five more: it must go on at 11, not bring back 6..10.
    more = _with_config(settings, limit=15)
    restarted = TaskProcess(more, tmp_path).start()
    wait_for(lambda: committed_offsets(desired) == {"s0": 15}, 60, "records 11..15")
    assert restarted.terminate() == ExitCode.STOPPED
    seqs = _committed_seqs(kafka_bootstrap, desired.source.spec.topic)
    assert seqs == [1, 2, 3, 4, 5, 11, 12, 13, 14, 15], "the dropped batch 6..10 stays dropped"


def test_a_transaction_that_outlives_its_timeout_is_reported_as_such_not_as_fenced(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Boundaries every 8 s against a 2 s transaction timeout (what admission now
    refuses): the broker aborts each transaction; the task must say so and exit 1, not
    exit 75 "fenced while current" and loop on it."""
    desired = plan(
        kafka_bootstrap,
        tasks_max=1,
        boundary="interval",
        interval_ms=8000,
        config={"streams": 1, "batchSize": 1, "pollIntervalMs": 100},
    )
    settings = only_task(desired, tmp_path).model_copy(update={"transaction_timeout_ms": 2000})
    task = TaskProcess(settings, tmp_path).start()
    assert task.wait(60) == ExitCode.ERROR
    assert "longer than transaction.timeout.ms=2000" in task.log_path.read_text()
    assert committed_offsets(desired) == {}


def test_a_restarted_task_of_a_replaced_generation_leaves_the_live_task_alone(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Generation 2 runs task 0; a process of generation 1 with the same id restarts (a
    kubelet restart on a partitioned node). It must learn it is superseded before it
    initialises, or its init fences the live task, which exits 75, restarts, and so on."""
    desired = plan(
        kafka_bootstrap, tasks_max=1, config={"streams": 1, "batchSize": 5, "pollIntervalMs": 50}
    )
    authority = tmp_path / "state.json"
    write_generation(authority, 2, 1, "enabled")
    (live_settings,) = generation_settings(desired, 2, authority)
    live = TaskProcess(live_settings, tmp_path).start()
    wait_for(lambda: committed_offsets(desired).get("s0", 0) > 0, 60, "the live task's commits")

    zombie = TaskProcess(live_settings.model_copy(update={"generation": 1}), tmp_path).start()
    assert zombie.wait(60) == ExitCode.STOPPED
    reached = committed_offsets(desired)["s0"]
    wait_for(lambda: committed_offsets(desired)["s0"] > reached + 50, 60, "more commits")
    assert live.alive, "the live task was fenced by a superseded process"
    assert live.terminate() == ExitCode.STOPPED
    assert "before initialising" in zombie.log_path.read_text()


def test_a_disabled_task_of_a_replaced_generation_writes_nothing(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """A stale supervisor (an old operator replica) starts a `disabled` task of
    generation 1 after generation 2 was recorded: at-least-once would allow the
    duplicates, but one read of the record avoids them."""
    desired = plan(kafka_bootstrap, mode="disabled", tasks_max=1, config={"streams": 1})
    authority = tmp_path / "state.json"
    write_generation(authority, 2, 1, "disabled")
    (current,) = generation_settings(desired, 2, authority)
    stale = TaskProcess(current.model_copy(update={"generation": 1}), tmp_path).start()
    assert stale.wait(60) == ExitCode.STOPPED
    assert "superseded" in stale.log_path.read_text()
    assert drain(kafka_bootstrap, desired.source.spec.topic, "read_uncommitted", 1.0) == []


def test_same_named_sources_in_two_namespaces_keep_their_own_offsets(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Two sources `orders`, in namespaces a and b, share one offsets topic (Connect's
    habit of one global topic). b must start at 1, not where a stopped."""
    desired = plan(kafka_bootstrap, tasks_max=1, config={"streams": 1, "limit": 100})
    shared = only_task(desired, tmp_path)
    first = shared.model_copy(update={"namespace": "a", "topic": f"{shared.topic}-a"})
    second = shared.model_copy(update={"namespace": "b", "topic": f"{shared.topic}-b"})
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    task = TaskProcess(first, tmp_path / "a").start()
    wait_for(
        lambda: len(drain(kafka_bootstrap, first.topic, "read_committed", 0.5)) == 100,
        60,
        "a's 100 records",
    )
    assert task.terminate() == ExitCode.STOPPED
    task = TaskProcess(second, tmp_path / "b").start()
    wait_for(
        lambda: len(_committed_seqs(kafka_bootstrap, second.topic)) == 100,
        60,
        "b's own 100 records",
    )
    assert task.terminate() == ExitCode.STOPPED
    assert _committed_seqs(kafka_bootstrap, second.topic) == list(range(1, 101))
