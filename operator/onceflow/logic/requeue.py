"""When an object's reconcile loop looks again, from what its last pass found.

Watches wake a loop whenever something it reads changes, so the delay chosen here
is only for what no watch shows: a settled object is looked at again after the
resync period (the safety net for a missed event or an unwatched input), stretched
when there are more objects than the resync budget covers, so the operator's idle cost
stops growing with the number of objects; an object still on its way is observed
with a delay that grows while it stays unsettled (a task that never gets ready, a
tenant's broken Secret) so one tenant cannot keep the operator busy, and a pass that
failed backs off the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Outcome(Enum):
    SETTLED = "settled"
    """The object is where its spec says (Ready)."""
    PROGRESSING = "progressing"
    """Not there yet, and no step said when to look again."""
    RETRY = "retry"
    """A step said when it can go on (``RetryLaterError``)."""
    FAILED = "failed"
    """The pass raised: a bug or an unexpected API answer."""


@dataclass(frozen=True)
class RequeuePolicy:
    resync_s: float = 120.0
    first_poll_s: float = 1.0
    max_poll_s: float = 30.0
    resyncs_per_s: float = 5.0
    """How many resync passes a second all objects together make at most, on average
    (0: no bound). Below ``resync_s * resyncs_per_s`` objects each is resynced every
    ``resync_s``; above, less often: 2,000 sources made 17 settled passes a second at a
    120 s resync, a tenth of a core spent re-reading what watches already showed."""
    max_resync_s: float = 600.0
    """The budget never stretches a resync beyond this: what only a resync looks at (a
    slot's retained WAL, a Pipeline's place in the hanging-transaction watch) is never
    older than that, and past ``max_resync_s * resyncs_per_s`` objects (3,000) the idle
    cost grows again, at a fifth of its old slope."""

    def resync_period_s(self, objects: int) -> float:
        """Every object's resync period when ``objects`` are watched."""
        if self.resyncs_per_s <= 0:
            return self.resync_s
        stretched = min(objects / self.resyncs_per_s, self.max_resync_s)
        return max(self.resync_s, stretched)

    @property
    def longest_resync_s(self) -> float:
        """The longest a settled object waits for its resync, whatever the count (the
        ±10 % spread included)."""
        return 1.1 * max(self.resync_s, self.max_resync_s if self.resyncs_per_s > 0 else 0.0)

    def delay(
        self,
        outcome: Outcome,
        streak: int,
        asked_s: float | None = None,
        spread: float = 0.5,
        objects: int = 1,
    ) -> float:
        """Seconds until the next pass. ``streak`` counts the passes in a row, this one
        included, that ended without the object settling and without a wake-up in
        between; ``asked_s`` is a RETRY's own delay (a fence backoff, a source system
        check), never shortened: a step that keeps asking for a second while nothing it
        waits for changes is looked at less and less often too. ``spread`` (0..1) moves
        a resync within ±10 %, so objects started together do not resync together;
        ``objects`` is how many objects have loops (``resync_period_s``)."""
        if outcome is Outcome.SETTLED:
            return self.resync_period_s(objects) * (0.9 + 0.2 * spread)
        grown = min(self.max_poll_s, self.resync_s, self.first_poll_s * 2.0 ** max(0, streak - 1))
        if outcome is Outcome.RETRY and asked_s is not None:
            return max(asked_s, grown)
        return grown
