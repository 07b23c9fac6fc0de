"""The persisted truth about a source's task generations (status or state file).

A record names what the running generation is (its number, task count, mode, config
fingerprint, transactional ids and offsets topic) and what its predecessor was, so a
supervisor that crashed between "intent recorded" and "fenced" knows exactly whose
producers still need fencing, even when the ids or the offsets topic changed with the
new generation (a renamed prefix, a source moved to another Pipeline).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from onceflow.api.handled_requests import earlier_ids, handled
from onceflow.api.pipeline import ExactlyOnceMode, WorkloadState
from onceflow.api.source import OffsetsChangeResult
from onceflow.model.tasks import DesiredGeneration, OffsetEntries

LegacyIds = Callable[[int], tuple[str, ...]]
"""Ids a record from before ids were recorded had, by task count."""


@dataclass(frozen=True)
class OffsetsOutcome:
    """What became of an offsets change (its id is never applied twice). While
    ``Applying`` it carries what is being written, so the write can be finished by
    whoever reads the record next."""

    id: str
    result: OffsetsChangeResult
    message: str = ""
    partitions: int = 0
    reset: bool = False
    writing: OffsetEntries = ()
    earlier: tuple[str, ...] = ()
    """Ids of the changes handled before this one (``api.handled_requests``)."""

    @property
    def applying(self) -> bool:
        return self.result is OffsetsChangeResult.APPLYING

    def handled(self, change_id: str) -> bool:
        return handled(change_id, self.id, self.earlier)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "result": self.result.value,
            "message": self.message,
            "partitions": self.partitions,
            "reset": self.reset,
            "writing": [
                {"partition": dict(partition), "offset": None if offset is None else dict(offset)}
                for partition, offset in self.writing
            ],
            "earlier": list(self.earlier),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> OffsetsOutcome | None:
        if not data:
            return None
        return cls(
            str(data["id"]),
            OffsetsChangeResult(data["result"]),
            str(data.get("message") or ""),
            int(data.get("partitions") or 0),
            bool(data.get("reset")),
            tuple((entry["partition"], entry.get("offset")) for entry in data.get("writing") or ()),
            tuple(str(each) for each in data.get("earlier") or ()),
        )


@dataclass(frozen=True)
class GenerationRecord:
    generation: int
    fenced_generation: int
    """Generation whose predecessors are all fenced (or gone); tasks start only when it
    equals ``generation``."""
    task_count: int
    mode: ExactlyOnceMode
    fingerprint: str
    ids: tuple[str, ...]
    offsets_topic: str
    incarnation: str
    """New with every first record: tasks of an earlier incarnation (a deleted and
    re-created source, a lost status) are superseded whatever their generation number."""
    previous_ids: tuple[str, ...] = ()
    previous_mode: ExactlyOnceMode | None = None
    """None when unknown (a first record, a record that lost it): the predecessor is
    then treated as unfenceable and waited for until gone."""
    previous_offsets_topic: str | None = None
    state: WorkloadState = WorkloadState.RUNNING
    """Recorded before anything is paused, stopped or started again; tasks read it."""
    stop_fenced: bool = False
    """Stopped, and since then every id of the generation fenced (or its
    non-transactional tasks confirmed gone)."""
    offsets_change: OffsetsOutcome | None = None
    """The last offsets change handled: applied or refused, or being applied."""

    @property
    def fencing_pending(self) -> bool:
        return self.fenced_generation < self.generation

    @property
    def stopped(self) -> bool:
        """Stopped and proven unable to write: the precondition for changing offsets."""
        return self.state is WorkloadState.STOPPED and self.stop_fenced and not self.fencing_pending

    @classmethod
    def first(cls, desired: DesiredGeneration) -> GenerationRecord:
        """Generation 1, not yet fenced: whatever is left of an earlier incarnation (pods
        of a re-created source, processes of a lost state) goes first."""
        return cls(
            generation=1,
            fenced_generation=0,
            task_count=desired.task_count,
            mode=desired.mode,
            fingerprint=desired.fingerprint,
            ids=desired.ids,
            offsets_topic=desired.offsets_topic,
            incarnation=uuid.uuid4().hex[:12],
            state=desired.state,
        )

    def with_new_generation(self, desired: DesiredGeneration) -> GenerationRecord:
        """The intent to start the next generation, recorded before anything is stopped."""
        return replace(
            self,
            generation=self.generation + 1,
            task_count=desired.task_count,
            mode=desired.mode,
            fingerprint=desired.fingerprint,
            ids=desired.ids,
            offsets_topic=desired.offsets_topic,
            previous_ids=self.ids,
            previous_mode=self.mode,
            previous_offsets_topic=self.offsets_topic,
            stop_fenced=False,
        )

    def with_replanned(self, desired: DesiredGeneration) -> GenerationRecord:
        """A pending generation (no task of it ever started) re-planned for a newer spec:
        same number, same predecessor to fence."""
        return replace(
            self,
            task_count=desired.task_count,
            mode=desired.mode,
            fingerprint=desired.fingerprint,
            ids=desired.ids,
            offsets_topic=desired.offsets_topic,
        )

    def with_fenced(self) -> GenerationRecord:
        """A stopped source is not stop-fenced by this: its predecessor's ids may have
        been left to the successor's initialisation (one unchanged id), and a stopped
        source starts no successor, so ``stop_fenced`` waits for the stop's own fence."""
        return replace(self, fenced_generation=self.generation)

    def with_state(self, state: WorkloadState) -> GenerationRecord:
        return replace(self, state=state, stop_fenced=False)

    def with_stop_fenced(self) -> GenerationRecord:
        return replace(self, stop_fenced=True)

    def with_offsets_change(self, outcome: OffsetsOutcome) -> GenerationRecord:
        """``outcome`` as the last change handled, the ids handled before it kept."""
        last = self.offsets_change
        earlier = earlier_ids(last.id, last.earlier, outcome.id) if last else ()
        return replace(self, offsets_change=replace(outcome, earlier=earlier))

    def to_json(self) -> dict[str, Any]:
        return {
            "generation": self.generation,
            "fencedGeneration": self.fenced_generation,
            "taskCount": self.task_count,
            "mode": self.mode.value,
            "fingerprint": self.fingerprint,
            "transactionalIds": list(self.ids),
            "offsetsTopic": self.offsets_topic,
            "incarnation": self.incarnation,
            "previousTransactionalIds": list(self.previous_ids),
            "previousMode": self.previous_mode.value if self.previous_mode else None,
            "previousOffsetsTopic": self.previous_offsets_topic,
            "state": self.state.value,
            "stopFenced": self.stop_fenced,
            "offsetsChange": self.offsets_change.to_json() if self.offsets_change else None,
        }

    @classmethod
    def from_json(
        cls, data: Mapping[str, Any], legacy_ids: LegacyIds, legacy_offsets_topic: str
    ) -> GenerationRecord:
        """Reads a record; one written before ids were recorded gets the ids its tasks
        actually used (``legacy_ids``), and unknown predecessors stay unknown."""
        task_count = int(data["taskCount"])
        pending = int(data["fencedGeneration"]) < int(data["generation"])
        ids = data.get("transactionalIds")
        previous_ids = data.get("previousTransactionalIds")
        if previous_ids is None and pending and data.get("previousTaskCount") is not None:
            previous_ids = legacy_ids(int(data["previousTaskCount"]))
        previous_mode = data.get("previousMode")
        return cls(
            generation=int(data["generation"]),
            fenced_generation=int(data["fencedGeneration"]),
            task_count=task_count,
            mode=ExactlyOnceMode(data["mode"]),
            fingerprint=str(data["fingerprint"]),
            ids=tuple(ids) if ids is not None else legacy_ids(task_count),
            offsets_topic=str(data.get("offsetsTopic") or legacy_offsets_topic),
            incarnation=str(data.get("incarnation") or ""),
            previous_ids=tuple(previous_ids or ()),
            # A pending legacy record that lost its previous mode must not be trusted to
            # have had a fenceable predecessor.
            previous_mode=ExactlyOnceMode(previous_mode) if previous_mode else None,
            previous_offsets_topic=data.get("previousOffsetsTopic"),
            state=WorkloadState(data.get("state") or WorkloadState.RUNNING),
            stop_fenced=bool(data.get("stopFenced")),
            offsets_change=OffsetsOutcome.from_json(data.get("offsetsChange")),
        )
