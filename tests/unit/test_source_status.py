"""Pod planning and status translation for KafkaSources, from pod dicts alone."""

from __future__ import annotations

from typing import Any

from onceflow.api import ExactlyOnceMode
from onceflow.api.source import KafkaSourceStatus
from onceflow.logic.generations import GenerationRecord
from onceflow.logic.source_status import (
    record_from_status,
    status_with_record,
    task_statuses,
    workers_from_pods,
)
from onceflow.model.tasks import DesiredGeneration


def pod(
    gen: int,
    task: int,
    phase: str = "Running",
    deleting: bool = False,
    ready: bool = True,
    restarts: int = 0,
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"s-g{gen}-{task}",
            "labels": {"onceflow.io/generation": str(gen), "onceflow.io/task": str(task)},
            "deletionTimestamp": "2026-01-01T00:00:00Z" if deleting else None,
        },
        "status": {
            "phase": phase,
            "containerStatuses": [{"ready": ready, "restartCount": restarts}],
        },
    }


def test_pods_become_protocol_workers() -> None:
    workers = workers_from_pods([pod(2, 0), pod(2, 1, phase="Succeeded"), pod(1, 0, deleting=True)])
    assert [(w.generation, w.task, w.stopping, w.finished) for w in workers] == [
        (2, 0, False, False),
        (2, 1, False, True),
        (1, 0, True, False),
    ]


def test_task_statuses_report_the_current_generation_only() -> None:
    tasks = task_statuses([pod(2, 1, restarts=3), pod(2, 0, ready=False), pod(1, 0)], 2)
    assert [(t.id, t.ready, t.restarts) for t in tasks] == [(0, False, 0), (1, True, 3)]


def test_a_tasks_last_failure_message_reaches_its_status() -> None:
    failed, stopped = pod(2, 0, restarts=2), pod(2, 1, restarts=1)
    failed["status"]["containerStatuses"][0]["lastState"] = {
        "terminated": {"exitCode": 1, "message": "config.paths: /data/in does not exist\n"}
    }
    stopped["status"]["containerStatuses"][0]["lastState"] = {
        "terminated": {"exitCode": 0, "message": "stopped"}
    }
    tasks = task_statuses([failed, stopped], 2)
    assert [t.last_error for t in tasks] == ["config.paths: /data/in does not exist", None]


def _legacy_ids(count: int) -> tuple[str, ...]:
    return tuple(f"ns.p-src-{i}" for i in range(count))


def test_status_round_trips_the_generation_record() -> None:
    first = DesiredGeneration(3, ExactlyOnceMode.PREPARING, "abc", ("a/source/s/0",), "off")
    then = DesiredGeneration(1, ExactlyOnceMode.ENABLED, "def", ("b/source/s/0",), "off2")
    record = GenerationRecord.first(first).with_fenced().with_new_generation(then)
    status = status_with_record(KafkaSourceStatus(), record)
    assert record_from_status(status, _legacy_ids, "legacy") == record
    assert record_from_status(KafkaSourceStatus(), _legacy_ids, "legacy") is None


def test_a_status_from_before_ids_were_recorded_gets_the_ids_its_tasks_used() -> None:
    """An older operator's status, fencing pending: the predecessor's ids are the old
    scheme's; its mode is kept, its offsets topic is the one it always was."""
    status = KafkaSourceStatus.model_validate(
        {
            "generation": 5,
            "fencedGeneration": 4,
            "taskCount": 2,
            "mode": "enabled",
            "taskConfigHash": "abc",
            "previousTaskCount": 3,
            "previousMode": "enabled",
        }
    )
    record = record_from_status(status, _legacy_ids, "ns.p-src-offsets")
    assert record is not None
    assert record.ids == _legacy_ids(2)
    assert record.previous_ids == _legacy_ids(3)
    assert record.offsets_topic == "ns.p-src-offsets"
