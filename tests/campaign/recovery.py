"""How long a pipeline took to recover from each fault, from the timeline: the time
from the fault being over (a kill at once, a pause or partition when lifted) to the
pipeline's next new output, read committed. Pure: the campaign samples, this judges."""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from tests.campaign.kinds import FaultKind

Progress = Sequence[tuple[float, int]]
"""``(time, records visible so far)`` of one pipeline's output, time ascending."""


@dataclass(frozen=True)
class Strike:
    kind: FaultKind
    pipeline: str
    """The pipeline whose output shows the fault (and its recovery)."""
    struck_at: float
    cleared_at: float
    """When the fault was over: a kill's moment, a pause or partition's lifting."""
    landed: bool
    """Whether the fault met what it was aimed at (a transaction open, a batch in
    flight, a leader of the topic): a fault that missed proves nothing."""
    evidence: str


def recovery_s(strike: Strike, progress: Progress) -> float | None:
    """Seconds from the strike's clearing to the first sample showing more output than
    there was then; None if none does (the pipeline never moved again in the run)."""
    times = [t for t, _ in progress]
    at = bisect.bisect_right(times, strike.cleared_at) - 1
    before = progress[at][1] if at >= 0 else 0
    for t, seen in progress[at + 1 :]:
        if seen > before:
            return max(0.0, t - strike.cleared_at)
    return None


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile: a p99 of few values is their largest, not a guess."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


@dataclass(frozen=True)
class KindRecovery:
    kind: FaultKind
    struck: int
    landed: int
    recovered: int
    median_s: float | None
    p99_s: float | None


def recovery_by_kind(
    strikes: Iterable[Strike], progress: Mapping[str, Progress]
) -> list[KindRecovery]:
    """Per kind struck: how many, how many landed, and the recovery times of those
    (a fault that missed says nothing of recovery)."""
    by_kind: dict[FaultKind, list[Strike]] = {}
    for strike in strikes:
        by_kind.setdefault(strike.kind, []).append(strike)
    rows = []
    for kind in FaultKind:
        struck = by_kind.get(kind, [])
        if not struck:
            continue
        times = [
            t
            for s in struck
            if s.landed and (t := recovery_s(s, progress.get(s.pipeline, ()))) is not None
        ]
        rows.append(
            KindRecovery(
                kind,
                struck=len(struck),
                landed=sum(s.landed for s in struck),
                recovered=len(times),
                median_s=statistics.median(times) if times else None,
                p99_s=percentile(times, 0.99) if times else None,
            )
        )
    return rows
