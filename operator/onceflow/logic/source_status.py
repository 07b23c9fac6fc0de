"""Pure translations between a KafkaSource's status, its pods, and generation records.

The status *is* the persisted generation record on a cluster (DESIGN 3.2); these
functions keep the two shapes in step and read pod state without any API call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from onceflow.api.source import KafkaSourceStatus, TaskStatus
from onceflow.logic.generations import GenerationRecord
from onceflow.model.objects import LABEL_GENERATION, LABEL_TASK

Pod = Mapping[str, Any]


def record_from_status(status: KafkaSourceStatus | None) -> GenerationRecord | None:
    if status is None or status.generation is None or status.mode is None:
        return None
    return GenerationRecord(
        generation=status.generation,
        fenced_generation=status.fenced_generation or 0,
        task_count=status.task_count or 0,
        mode=status.mode,
        fingerprint=status.task_config_hash or "",
        previous_task_count=status.previous_task_count or 0,
        previous_mode=status.previous_mode or status.mode,
    )


def status_with_record(status: KafkaSourceStatus, record: GenerationRecord) -> KafkaSourceStatus:
    return status.model_copy(
        update={
            "generation": record.generation,
            "fenced_generation": record.fenced_generation,
            "task_count": record.task_count,
            "mode": record.mode,
            "task_config_hash": record.fingerprint,
            "previous_task_count": record.previous_task_count,
            "previous_mode": record.previous_mode,
        }
    )


def pod_generation(pod: Pod) -> int | None:
    value = (pod["metadata"].get("labels") or {}).get(LABEL_GENERATION)
    return int(value) if value is not None and str(value).isdigit() else None


def pod_task(pod: Pod) -> int | None:
    value = (pod["metadata"].get("labels") or {}).get(LABEL_TASK)
    return int(value) if value is not None and str(value).isdigit() else None


def terminating(pod: Pod) -> bool:
    return pod["metadata"].get("deletionTimestamp") is not None


def _phase(pod: Pod) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def _container(pod: Pod) -> Mapping[str, Any]:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return statuses[0] if statuses else {}


@dataclass(frozen=True)
class PodActions:
    """What to do about a generation's pods in steady state."""

    delete: tuple[str, ...]
    """Pods of other generations, and finished pods of this one (a source task never
    finishes on its own: exit 0 means it was stopped, e.g. evicted)."""
    create: tuple[int, ...]
    """Task ids with no live pod."""


def plan_pods(pods: Sequence[Pod], generation: int, task_count: int) -> PodActions:
    delete: list[str] = []
    live: set[int] = set()
    for pod in pods:
        name = pod["metadata"]["name"]
        if terminating(pod):
            continue
        if pod_generation(pod) != generation or _phase(pod) in ("Succeeded", "Failed"):
            delete.append(name)
        elif (task := pod_task(pod)) is not None:
            live.add(task)
    # A finished pod still holds its name; recreate only once it is gone.
    taken = {pod_task(p) for p in pods if pod_generation(p) == generation}
    create = tuple(t for t in range(task_count) if t not in live and t not in taken)
    return PodActions(tuple(delete), create)


def task_statuses(pods: Sequence[Pod], generation: int) -> list[TaskStatus]:
    tasks = []
    for pod in pods:
        task = pod_task(pod)
        if pod_generation(pod) != generation or task is None or terminating(pod):
            continue
        container = _container(pod)
        tasks.append(
            TaskStatus(
                id=task,
                pod=pod["metadata"]["name"],
                phase=_phase(pod),
                ready=bool(container.get("ready")) and _phase(pod) == "Running",
                restarts=int(container.get("restartCount") or 0),
            )
        )
    return sorted(tasks, key=lambda t: t.id)
