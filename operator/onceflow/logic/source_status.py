"""Pure translations between a KafkaSource's status, its pods, and generation records.

The status *is* the persisted generation record on a cluster (DESIGN 3.2); these
functions keep the two shapes in step and read pod state without any API call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from onceflow.api.pipeline import WorkloadState
from onceflow.api.source import (
    KafkaSourceStatus,
    OffsetsChangeResult,
    OffsetsChangeStatus,
    RetentionStatus,
    TaskStatus,
)
from onceflow.logic.generations import GenerationRecord, LegacyIds
from onceflow.logic.protocol import Worker
from onceflow.model.objects import (
    LABEL_GENERATION,
    LABEL_INCARNATION,
    LABEL_POD_TEMPLATE,
    LABEL_TASK,
)

Pod = Mapping[str, Any]


def record_from_status(
    status: KafkaSourceStatus | None, legacy_ids: LegacyIds, legacy_offsets_topic: str
) -> GenerationRecord | None:
    if status is None or status.generation is None or status.mode is None:
        return None
    wire = status.to_wire()
    return GenerationRecord.from_json(
        {
            **wire,
            "fencedGeneration": status.fenced_generation or 0,
            "taskCount": status.task_count or 0,
            "fingerprint": status.task_config_hash or "",
        },
        legacy_ids,
        legacy_offsets_topic,
    )


def status_with_record(status: KafkaSourceStatus, record: GenerationRecord) -> KafkaSourceStatus:
    return status.model_copy(
        update={
            "generation": record.generation,
            "fenced_generation": record.fenced_generation,
            "task_count": record.task_count,
            "mode": record.mode,
            "task_config_hash": record.fingerprint,
            "transactional_ids": list(record.ids),
            "offsets_topic": record.offsets_topic,
            "incarnation": record.incarnation,
            "previous_task_count": None,
            "previous_transactional_ids": list(record.previous_ids),
            "previous_mode": record.previous_mode,
            "previous_offsets_topic": record.previous_offsets_topic,
            "state": record.state,
            "stop_fenced": record.stop_fenced,
            "offsets_change": (
                OffsetsChangeStatus.model_validate(record.offsets_change.to_json())
                if record.offsets_change
                else None
            ),
        }
    )


def workers_from_pods(pods: Sequence[Pod]) -> tuple[Worker, ...]:
    """A source's pods as the generation protocol sees them."""
    return tuple(
        Worker(
            name=pod["metadata"]["name"],
            generation=pod_generation(pod),
            task=pod_task(pod),
            incarnation=(pod["metadata"].get("labels") or {}).get(LABEL_INCARNATION),
            stopping=terminating(pod),
            finished=_phase(pod) in ("Succeeded", "Failed"),
            template=(pod["metadata"].get("labels") or {}).get(LABEL_POD_TEMPLATE),
        )
        for pod in pods
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


def _last_error(container: Mapping[str, Any]) -> str | None:
    """The termination message of the container's last failed run (a task writes why
    it failed, e.g. which connector setting to fix)."""
    terminated = (container.get("lastState") or {}).get("terminated") or {}
    if terminated.get("exitCode", 0) == 0:
        return None
    message = str(terminated.get("message") or "").strip()
    return message or None


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
                last_error=_last_error(container),
            )
        )
    return sorted(tasks, key=lambda t: t.id)


RETAINS_TOO_MUCH = "SourceRetainsTooMuch"


def _size(count: int) -> str:
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} bytes"


def retention_condition(retention: RetentionStatus | None) -> tuple[bool, str, str]:
    """Degraded while the source system keeps more than its limit for the source:
    the tasks may well be running, but something holds them back (a task that keeps
    failing, a stopped generation, a slot nobody reads), and left alone the system's
    disk fills."""
    if retention is None or retention.bytes <= retention.limit_bytes:
        return (False, "Healthy", "")
    return (
        True,
        RETAINS_TOO_MUCH,
        f"{retention.what}: {_size(retention.bytes)}, over the limit of "
        f"{_size(retention.limit_bytes)} ({retention.limit_from}); the source is behind or "
        "not reading, and the system keeps everything since its last commit: fix what "
        "holds the tasks back (see status.tasks), or raise the limit",
    )


STATE_CHANGES: dict[WorkloadState, tuple[str, str]] = {
    WorkloadState.RUNNING: ("Resuming", "running again: tasks start (or go on) where they paused"),
    WorkloadState.PAUSED: (
        "Pausing",
        "paused: each task holds still at its next transaction boundary",
    ),
    WorkloadState.STOPPED: (
        "Stopping",
        "stopping: tasks end, then the generation's transactional ids are fenced",
    ),
}
"""The reason and message of a recorded state change, before it took hold."""

OFFSETS_CHANGE_EVENTS: dict[OffsetsChangeResult, str] = {
    OffsetsChangeResult.APPLYING: "OffsetsChanging",
    OffsetsChangeResult.APPLIED: "OffsetsChanged",
    OffsetsChangeResult.REFUSED: "OffsetsChangeRefused",
}
"""The event reason of each step of an offsets change."""


def at_rest(record: GenerationRecord, ready: int) -> tuple[bool, str, str]:
    """Ready, reason and message of a paused or stopped source once the protocol has
    nothing left to do: Ready means "in the state asked for", so a rollout (and
    ``kubectl wait``) does not wait on a source that is stopped on purpose."""
    if record.state is WorkloadState.STOPPED:
        return (
            True,
            "Stopped",
            f"generation {record.generation}: stopped; no task runs, its transactional ids "
            "are fenced and its offsets kept; set spec.state: running to resume",
        )
    count = record.task_count
    return (
        ready == count,
        "Paused",
        f"generation {record.generation}: paused; {ready}/{count} task(s) up, each holding "
        "its transactional id without polling or committing from its next transaction "
        "boundary (the gauge onceflow_source_paused says when); set spec.state: running to "
        "resume",
    )
