"""The kinds of fault the campaign strikes with, and what each one needs of the machine."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class FaultKind(StrEnum):
    TASK_KILL = "task-kill"
    """A source task SIGKILLed while a transaction of its is open."""
    TASK_ZOMBIE = "task-zombie"
    """A source task SIGSTOPped inside a transaction past its timeout, then woken."""
    DRIVER_KILL = "driver-kill"
    """A Spark driver SIGKILLed inside a batch (planned, not committed)."""
    EXECUTOR_KILL = "executor-kill"
    """A Spark executor's Python workers SIGKILLed inside a batch."""
    LEADER_KILL = "broker-leader-kill"
    """The broker leading the source topic's partition, SIGKILLed with a transaction
    open on it."""
    COORDINATOR_KILL = "broker-coordinator-kill"
    """The transaction coordinator of a live task's id, SIGKILLed with its transaction
    open."""
    BROKER_PAUSE = "broker-pause"
    """A leader SIGSTOPped until the others drop it from the ISR, then woken."""
    PARTITION = "network-partition"
    """The source's run cut off from every broker past its transaction timeout."""
    LOSSY_LINK = "network-lossy"
    """The source's run on a slow link dropping packets at random."""
    DATABASE_BACKEND_KILL = "postgres-backend-kill"
    """The backend streaming the CDC source's slot, terminated."""
    DATABASE_RESTART = "postgres-restart"
    """PostgreSQL crashed (no shutdown checkpoint) and started again under CDC."""
    SUPERVISOR_KILL = "supervisor-kill"
    """``onceflow run`` SIGKILLed in the middle of a rollout (the new generation's
    intent recorded, its tasks not started), then started again."""
    GENERATION_CHANGE = "generation-change"
    """The source's task count changed in its manifest: a new generation."""
    SPEC_EDIT = "spec-edit"
    """A SparkJob's trigger edited in its manifest: its driver restarted."""


NEEDS_ROOT = frozenset({FaultKind.PARTITION, FaultKind.LOSSY_LINK})
"""Network namespaces, veths, iptables and tc need root."""

SPARK = frozenset({FaultKind.DRIVER_KILL, FaultKind.EXECUTOR_KILL, FaultKind.SPEC_EDIT})
"""Kinds that strike a Spark job: a campaign without Spark jobs leaves them out."""


def available(root: bool, spark: bool) -> tuple[FaultKind, ...]:
    """Every kind this machine and campaign can strike with."""
    return tuple(
        kind
        for kind in FaultKind
        if (root or kind not in NEEDS_ROOT) and (spark or kind not in SPARK)
    )


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
