"""Pod planning and status translation for KafkaSources, from pod dicts alone."""

from __future__ import annotations

from typing import Any

from onceflow.api import ExactlyOnceMode
from onceflow.api.source import KafkaSourceStatus
from onceflow.logic.generations import GenerationRecord
from onceflow.logic.source_status import (
    plan_pods,
    record_from_status,
    status_with_record,
    task_statuses,
)


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


def test_missing_tasks_are_created_and_other_generations_deleted() -> None:
    actions = plan_pods([pod(2, 0), pod(1, 1)], generation=2, task_count=2)
    assert actions.delete == ("s-g1-1",)
    assert actions.create == (1,)


def test_finished_pods_are_deleted_before_being_recreated() -> None:
    actions = plan_pods([pod(2, 0, "Succeeded"), pod(2, 1, "Failed")], 2, 2)
    assert set(actions.delete) == {"s-g2-0", "s-g2-1"}
    assert actions.create == (), "names are still taken until the pods are gone"


def test_terminating_pods_are_left_alone() -> None:
    actions = plan_pods([pod(1, 0, deleting=True)], 2, 1)
    assert actions.delete == ()
    assert actions.create == (0,)


def test_task_statuses_report_the_current_generation_only() -> None:
    tasks = task_statuses([pod(2, 1, restarts=3), pod(2, 0, ready=False), pod(1, 0)], 2)
    assert [(t.id, t.ready, t.restarts) for t in tasks] == [(0, False, 0), (1, True, 3)]


def test_status_round_trips_the_generation_record() -> None:
    record = GenerationRecord(5, 4, 3, ExactlyOnceMode.ENABLED, "abc", 2, ExactlyOnceMode.PREPARING)
    status = status_with_record(KafkaSourceStatus(), record)
    assert record_from_status(status) == record
    assert record_from_status(KafkaSourceStatus()) is None
