"""The gated two-phase rollout of a pipeline's exactly-once mode (DESIGN 3.3).

``disabled -> preparing -> enabled`` and back the same way, one step at a time, and
a step is taken only when every workload runs the current mode and is ready. Going
up, consumers switch to read_committed (preparing) before any producer becomes
transactional (enabled); going down, producers leave transactions (preparing) before
consumers stop reading committed (disabled).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from onceflow.api.pipeline import ExactlyOnceMode

ORDER = (ExactlyOnceMode.DISABLED, ExactlyOnceMode.PREPARING, ExactlyOnceMode.ENABLED)


def next_mode(current: ExactlyOnceMode, target: ExactlyOnceMode) -> ExactlyOnceMode:
    """One step from ``current`` toward ``target``; never a jump."""
    here, there = ORDER.index(current), ORDER.index(target)
    if here == there:
        return current
    return ORDER[here + (1 if there > here else -1)]


@dataclass(frozen=True)
class WorkloadObservation:
    kind: str
    name: str
    observed_mode: ExactlyOnceMode | None
    ready: bool
    message: str = ""
    degraded: str = ""
    """Why the workload reports Degraded ("" while it does not)."""

    @property
    def label(self) -> str:
        return f"{self.kind}/{self.name}"


@dataclass(frozen=True)
class RolloutDecision:
    current: ExactlyOnceMode
    """The mode to publish in status; workloads converge on it."""
    step: str
    """A few words for ``kubectl get``'s Step column (``waiting 1/3``, ``stable``)."""
    detail: str
    """The whole sentence, with each lagging workload's reason: the conditions' message
    and the event, where a column would be cut off."""
    waiting_for: tuple[str, ...]
    advanced: bool

    @property
    def settled(self) -> bool:
        return not self.waiting_for and not self.advanced


def resume_point(
    workloads: Sequence[WorkloadObservation], target: ExactlyOnceMode
) -> ExactlyOnceMode:
    """Where a Pipeline without a rollout status (new, re-created, status lost) starts.

    Where workloads ran, the highest mode any of them runs: starting from ``disabled``
    instead would jump running transactional sources straight to non-transactional
    ones, with no ``preparing`` step between (and consumers reading uncommitted too
    early). Where none ever ran, the target itself: the walk exists to switch running
    consumers before producers go transactional (KIP-618's preparing step upgrades a
    running cluster), and a pipeline that never ran has neither, so it is exactly-once
    from its first record instead of writing at-least-once until every workload,
    however stuck, has walked up."""
    observed = [ORDER.index(w.observed_mode) for w in workloads if w.observed_mode is not None]
    return ORDER[max(observed)] if observed else target


def decide_rollout(
    current: ExactlyOnceMode,
    target: ExactlyOnceMode,
    workloads: Sequence[WorkloadObservation],
) -> RolloutDecision:
    lagging = tuple(w.label for w in workloads if w.observed_mode is not current or not w.ready)
    if lagging:
        done = len(workloads) - len(lagging)
        # Every lagging workload by name, with its reason when it reported one: one
        # that has no status yet (no reconciler ran it) is named all the same.
        reasons = "; ".join(
            f"{w.label}: {w.message}" if w.message else w.label
            for w in workloads
            if w.label in lagging
        )
        detail = (
            f"waiting for {len(lagging)}/{len(workloads)} workloads in {current} ({done} ready)"
        )
        if ORDER.index(current) < ORDER.index(target):
            detail = f"{target} is not in force yet (workloads run {current}); {detail}"
        return RolloutDecision(
            current,
            f"waiting {len(lagging)}/{len(workloads)}",
            detail + (f": {reasons}" if reasons else ""),
            lagging,
            advanced=False,
        )
    if current is target:
        return RolloutDecision(current, "stable", f"stable in {current}", (), advanced=False)
    following = next_mode(current, target)
    return RolloutDecision(
        following,
        f"to {following}",
        f"moving from {current} to {following} (target {target})",
        (),
        advanced=True,
    )
