"""How long a pipeline took to recover from each fault, from its timeline: the time
from the fault being over (a kill at once, a pause or partition when lifted) to the
first output made after it becoming visible, read committed. Pure: the campaign
samples, this judges."""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from tests.campaign.kinds import FaultKind, Strike

Progress = Sequence[tuple[float, int]]
"""``(time, records visible so far)`` of one pipeline's output, time ascending."""


@dataclass
class Timeline:
    """One pipeline's output as a reader saw it, sampled in time order."""

    pipeline: str
    progress: list[tuple[float, int]] = field(default_factory=list)
    """``(time, records visible so far)``."""
    newest: list[tuple[float, float]] = field(default_factory=list)
    """``(time, the latest produce time of any record visible so far)``: a Kafka
    output's records carry when they were made, a table's rows do not (empty)."""
    latency: list[tuple[float, float]] = field(default_factory=list)
    """``(time, median seconds from produced to visible of the records seen then)``."""


def recovery_s(strike: Strike, timeline: Timeline) -> float | None:
    """Seconds from the strike's clearing to the first sample showing output made after
    it (a record produced since, where records say when they were made; otherwise more
    rows than there were then); None if none does (the pipeline never moved again)."""
    for t, produced in timeline.newest:
        if t >= strike.cleared_at and produced >= strike.cleared_at:
            return t - strike.cleared_at
    if timeline.newest:
        return None
    progress = timeline.progress
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
    strikes: Iterable[Strike], timelines: Mapping[str, Timeline]
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
            if s.landed
            and s.pipeline in timelines
            and (t := recovery_s(s, timelines[s.pipeline])) is not None
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
