"""Planning task generations: when a new one starts and whose producers to fence first.

Invariant protected here: no task of generation N+1 starts while a producer of
generation N could still commit. The plan is computed from the persisted
``GenerationRecord`` alone, so a supervisor that crashed between "intent recorded"
and "fenced" re-plans the same fencing on restart instead of skipping it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from onceflow.api.pipeline import ExactlyOnceMode
from onceflow.model.names import task_transactional_ids


@dataclass(frozen=True)
class GenerationRecord:
    """The persisted truth about a source's generations (status or state file)."""

    generation: int
    fenced_generation: int
    task_count: int
    mode: ExactlyOnceMode
    fingerprint: str
    previous_task_count: int = 0
    previous_mode: ExactlyOnceMode = ExactlyOnceMode.DISABLED

    @property
    def fencing_pending(self) -> bool:
        return self.fenced_generation < self.generation

    def with_new_generation(
        self, task_count: int, mode: ExactlyOnceMode, fingerprint: str
    ) -> GenerationRecord:
        """The intent to start the next generation, recorded before anything is stopped."""
        return replace(
            self,
            generation=self.generation + 1,
            task_count=task_count,
            mode=mode,
            fingerprint=fingerprint,
            previous_task_count=self.task_count,
            previous_mode=self.mode,
        )

    def with_fenced(self) -> GenerationRecord:
        return replace(self, fenced_generation=self.generation)

    def to_json(self) -> dict[str, Any]:
        return {
            "generation": self.generation,
            "fencedGeneration": self.fenced_generation,
            "taskCount": self.task_count,
            "mode": self.mode.value,
            "fingerprint": self.fingerprint,
            "previousTaskCount": self.previous_task_count,
            "previousMode": self.previous_mode.value,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GenerationRecord:
        return cls(
            generation=int(data["generation"]),
            fenced_generation=int(data["fencedGeneration"]),
            task_count=int(data["taskCount"]),
            mode=ExactlyOnceMode(data["mode"]),
            fingerprint=str(data["fingerprint"]),
            previous_task_count=int(data.get("previousTaskCount", 0)),
            previous_mode=ExactlyOnceMode(data.get("previousMode", "disabled")),
        )


def first_record(task_count: int, mode: ExactlyOnceMode, fingerprint: str) -> GenerationRecord:
    """Generation 1 has no predecessor, so it is fenced by definition."""
    return GenerationRecord(1, 1, task_count, mode, fingerprint)


class GenerationAction(StrEnum):
    KEEP = "keep"
    """Desired tasks equal the running generation: nothing to do."""
    START_FIRST = "start-first"
    """No generation recorded yet."""
    NEW_GENERATION = "new-generation"
    """Task configs changed: record intent, stop old tasks, fence, start new ones."""
    FINISH_FENCING = "finish-fencing"
    """Intent was recorded but fencing never finished (crash): fence again, then start."""


@dataclass(frozen=True)
class GenerationPlan:
    action: GenerationAction
    record: GenerationRecord
    """The record to persist before acting."""
    fence_ids: tuple[str, ...]
    predecessors_must_be_gone: bool
    """The predecessor was non-transactional and so cannot be fenced: its processes
    must be confirmed gone before the new generation starts (KIP-618's non-compliant
    worker case)."""


def ids_to_fence(
    prefix: str,
    source: str,
    old_count: int,
    old_mode: ExactlyOnceMode,
    new_count: int,
    new_mode: ExactlyOnceMode,
) -> tuple[str, ...]:
    """Transactional ids of the predecessor generation that must be fenced.

    Only producers that had transactional ids can be fenced. 1 -> 1 with a
    transactional successor is skipped: the successor's own initialisation fences the
    only id. A non-transactional successor initialises nothing, so it gets no skip.
    """
    if old_count == 0 or not (old_mode.transactional or new_mode.transactional):
        return ()
    if old_count == 1 and new_count == 1 and new_mode.transactional:
        return ()
    return task_transactional_ids(prefix, source, old_count)


def plan_generation(
    record: GenerationRecord | None,
    *,
    prefix: str,
    source: str,
    task_count: int,
    mode: ExactlyOnceMode,
    desired_fingerprint: str,
) -> GenerationPlan:
    """What to do about a source's generations, from the persisted record alone."""
    if record is None:
        return GenerationPlan(
            GenerationAction.START_FIRST,
            first_record(task_count, mode, desired_fingerprint),
            (),
            False,
        )
    if record.fencing_pending:
        current = record
        action = GenerationAction.FINISH_FENCING
    elif record.fingerprint == desired_fingerprint:
        return GenerationPlan(GenerationAction.KEEP, record, (), False)
    else:
        current = record.with_new_generation(task_count, mode, desired_fingerprint)
        action = GenerationAction.NEW_GENERATION
    fence = ids_to_fence(
        prefix,
        source,
        current.previous_task_count,
        current.previous_mode,
        current.task_count,
        current.mode,
    )
    must_be_gone = current.mode.transactional and not current.previous_mode.transactional
    return GenerationPlan(action, current, fence, must_be_gone)
