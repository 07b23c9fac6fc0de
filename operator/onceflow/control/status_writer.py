"""One way every kind's status is read, given its conditions and written: a KafkaSource,
a SparkJob and a Pipeline each said Ready, Progressing and Degraded through their own
copy of the same few lines, and a copy that forgot the progress deadline or wrote an
unchanged status (waking every watcher for nothing) would have differed silently."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from onceflow.api.status import CommonStatus
from onceflow.control.failures import write_status
from onceflow.control.kube import KubeClient, Obj, now_rfc3339
from onceflow.logic.conditions import set_conditions

S = TypeVar("S", bound=CommonStatus)

Verdict = tuple[bool, str, str]
"""A condition as (status, reason, message)."""

BLOCKED = "blocked until the problem is fixed"


@dataclass(frozen=True)
class StatusWriter(Generic[S]):
    kube: KubeClient
    plural: str
    model: type[S]
    progress_deadline_s: float | None = None
    """Progressing for longer than this is Degraded too (None: never)."""

    def read(self, obj: Obj) -> S:
        return self.model.model_validate(obj.get("status") or {})

    def with_conditions(
        self, obj: Obj, status: S, *, ready: Verdict, progressing: Verdict, degraded: Verdict
    ) -> S:
        """``status`` with all three conditions set for the object's generation."""
        generation = obj["metadata"].get("generation")
        conditions = set_conditions(
            status.conditions,
            ready=ready,
            progressing=progressing,
            degraded=degraded,
            now=now_rfc3339(),
            observed_generation=generation,
            deadline_s=self.progress_deadline_s,
        )
        return status.model_copy(
            update={"observed_generation": generation, "conditions": conditions}
        )

    def blocked(self, obj: Obj, status: S, reason: str, message: str) -> S:
        """Degraded for ``reason``: what an object that cannot be reconciled says."""
        return self.with_conditions(
            obj,
            status,
            ready=(False, reason, message),
            progressing=(False, reason, BLOCKED),
            degraded=(True, reason, message),
        )

    def write(self, obj: Obj, status: S) -> Obj:
        """The object as written (or as it was, when its status already says this)."""
        wire = status.to_wire()
        if obj.get("status") == wire:
            return obj
        before = self.read(obj).conditions
        return write_status(self.kube, self.plural, obj, wire, before, status.conditions)
