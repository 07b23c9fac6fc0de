"""What a workload's pods say about it that its own object does not: a driver that
keeps exiting while its SparkApplication still reads RUNNING or SUBMITTED, an executor
the scheduler cannot place, a task crash-looping on an unreachable broker, and a
driver's Job whose pod the API server keeps refusing (only the Job's events say so).

Without this, such a workload showed Ready (or merely Progressing) and the reason sat
in a pod's status that nobody looks at. The finding names the pod, the cause in
Kubernetes' own words (the container's last error line, the scheduler's message) and
becomes the workload's Degraded condition and a Warning event.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from onceflow.logic.failure_line import failure_line

Pod = Mapping[str, Any]

RECENT = timedelta(minutes=10)
"""A failed run counts while it is this recent: a driver that failed once a day ago
and has run since is healthy; one that exits every 90 s always has a recent failure."""
REPEATED = 3
"""Restarts that make failing a pattern: one kill the kubelet recovered from (an OOM,
a node's hiccup, a chaos test) is not a workload in trouble."""


@dataclass(frozen=True)
class PodProblem:
    reason: str
    """CamelCase, for the condition: ContainerFailing, Unschedulable."""
    message: str


def _parse(timestamp: str | None) -> datetime | None:
    if not timestamp:
        return None
    try:
        return datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return None


def _unschedulable(pod: Pod) -> PodProblem | None:
    status = pod.get("status") or {}
    if status.get("phase") != "Pending":
        return None
    for condition in status.get("conditions") or []:
        if (
            condition.get("type") == "PodScheduled"
            and condition.get("status") == "False"
            and condition.get("reason") == "Unschedulable"
        ):
            return PodProblem(
                "Unschedulable",
                f"pod {pod['metadata']['name']} cannot be scheduled: "
                f"{condition.get('message') or 'no node fits it'}",
            )
    return None


def _failing(pod: Pod, now: datetime) -> PodProblem | None:
    """A container waiting in CrashLoopBackOff, or restarted REPEATED times with its
    last run ended in an error recently."""
    status = pod.get("status") or {}
    for container in status.get("containerStatuses") or []:
        waiting = (container.get("state") or {}).get("waiting") or {}
        terminated = (container.get("lastState") or {}).get("terminated") or (
            (container.get("state") or {}).get("terminated") or {}
        )
        code = terminated.get("exitCode")
        if not code:
            continue
        finished = _parse(terminated.get("finishedAt"))
        restarts = container.get("restartCount") or 0
        recent = finished is not None and now - finished <= RECENT
        if waiting.get("reason") != "CrashLoopBackOff" and not (restarts >= REPEATED and recent):
            continue
        said = failure_line(terminated.get("message") or "") or terminated.get("reason") or ""
        return PodProblem(
            "ContainerFailing",
            f"pod {pod['metadata']['name']}: container {container.get('name')} exited {code}"
            f" ({restarts} restarts)" + (f": {said}" if said else ""),
        )
    return None


def pods_problem(pods: Sequence[Pod], now: datetime) -> PodProblem | None:
    """The first thing wrong with these pods, failing containers before unplaceable
    pods (a crash says more than a wait); None when nothing is."""
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    ordered = sorted(live, key=lambda p: p["metadata"]["name"])
    for judge in (lambda p: _failing(p, now), _unschedulable):
        for pod in ordered:
            if found := judge(pod):
                return found
    return None


def creation_refused(owner: str, events: Sequence[Mapping[str, Any]]) -> PodProblem | None:
    """The latest ``FailedCreate`` among the events of a pod's owner (a spark-submit
    Job, whose controller cannot create the driver's pod: no ``onceflow-spark``
    ServiceAccount in the namespace, a quota, Pod Security), or None. The Job itself
    stays active with no pod and no condition, so the workload read Ready=False,
    "submitted", for ever."""
    refused = [e for e in events if e.get("reason") == "FailedCreate"]
    if not refused:
        return None
    latest = max(refused, key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
    return PodProblem("FailedCreate", f"{owner} cannot create its pod: {latest.get('message')}")
