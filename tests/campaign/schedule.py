"""The campaign's order of faults: every kind once first (a run that stops early has
still met them all), then a weighted random draw, reproducible from its seed."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from tests.campaign.kinds import FaultKind

SLOW_KINDS_WEIGHT = 0.1
"""Broker, network, database-restart, zombie and driver faults each hold the run for
10-40 s (the cluster whole again, a driver started and in a batch); the others for a
few seconds. Drawn a tenth as often, a long run spends its time striking, not waiting:
1,000 faults take about an hour on 2 cores instead of five."""

TASK_KILL_WEIGHT = 3.0
"""The commonest fault a real source meets (a pod evicted, a node lost)."""

SLOW = frozenset(
    {
        FaultKind.LEADER_KILL,
        FaultKind.COORDINATOR_KILL,
        FaultKind.BROKER_PAUSE,
        FaultKind.PARTITION,
        FaultKind.LOSSY_LINK,
        FaultKind.TASK_ZOMBIE,
        FaultKind.DATABASE_RESTART,
        FaultKind.DRIVER_KILL,
        FaultKind.SPEC_EDIT,
    }
)


def default_weights(kinds: Sequence[FaultKind]) -> dict[FaultKind, float]:
    return {
        kind: SLOW_KINDS_WEIGHT
        if kind in SLOW
        else TASK_KILL_WEIGHT
        if kind is FaultKind.TASK_KILL
        else 1.0
        for kind in kinds
    }


def fault_schedule(
    kinds: Sequence[FaultKind],
    faults: int,
    seed: int,
    weights: Mapping[FaultKind, float] | None = None,
) -> list[FaultKind]:
    """``faults`` kinds to strike with, in order. The first ``len(kinds)`` are every
    kind once, shuffled; fewer faults than kinds is refused (a kind never struck is a
    kind never tested)."""
    if faults < len(kinds):
        raise ValueError(f"{faults} faults cannot strike each of {len(kinds)} kinds once")
    rng = random.Random(seed)
    first = list(kinds)
    rng.shuffle(first)
    chances = weights or default_weights(kinds)
    rest = rng.choices(list(kinds), weights=[chances[k] for k in kinds], k=faults - len(kinds))
    return first + rest
