"""Hanging transactions, told from a slow one by watching partition ends over time.

A ``read_committed`` consumer reads a partition only up to its last stable offset (LSO):
the first offset of the oldest transaction still open there. While that transaction
stays open, every consumer of the partition stops at it, whatever is committed above.
The broker aborts an open transaction once its producer's ``transaction.timeout.ms``
passes, so an LSO that has not moved for longer than that while records sit above it
is held by something the timeout does not reach: a producer with a far longer timeout
that froze (a zombie), or a transaction the coordinator lost (Kafka's "hanging
transaction", KIP-664). Nothing in the client reports it; only the two ends do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from onceflow.api.source import KafkaSource
from onceflow.api.spark import KafkaDelivery, SparkJob

PartitionKey = tuple[str, int]
"""(topic, partition)."""


@dataclass(frozen=True)
class PartitionEnds:
    """One look at a partition: its LSO (``read_committed`` end) and high watermark."""

    topic: str
    partition: int
    stable: int
    high: int

    @property
    def key(self) -> PartitionKey:
        return (self.topic, self.partition)


@dataclass(frozen=True)
class Stall:
    """Where a partition's LSO has stood, with records above it, since when (seconds on
    a monotonic clock)."""

    stable: int
    since: float
    held: bool
    """Records sat above it at the last look: something open holds it there."""


@dataclass(frozen=True)
class Hanging:
    topic: str
    partition: int
    stable: int
    high: int
    age_s: float
    bound_s: float
    """How long its writers may keep a transaction open (with a margin)."""

    def describe(self) -> str:
        return (
            f"{self.topic}/{self.partition}: the last stable offset has stood at "
            f"{self.stable} for {self.age_s:.0f} s (longer than its writers may keep a "
            f"transaction open: {self.bound_s:.0f} s) with {self.high - self.stable} "
            "offset(s) above it"
        )


def track(
    stalls: Mapping[PartitionKey, Stall], looks: Iterable[PartitionEnds], now: float
) -> dict[PartitionKey, Stall]:
    """The stalls after a new look: a partition whose LSO moved, or that had nothing
    above it (no open transaction) at either look, starts over; one whose LSO stood
    with records above it keeps its ``since``. Partitions not looked at are dropped (a
    topic deleted, a pipeline changed)."""
    updated: dict[PartitionKey, Stall] = {}
    for look in looks:
        before = stalls.get(look.key)
        held = look.high > look.stable
        if before is not None and held and before.held and before.stable == look.stable:
            updated[look.key] = before
        else:
            updated[look.key] = Stall(look.stable, now, held)
    return updated


def hanging(
    stalls: Mapping[PartitionKey, Stall],
    looks: Iterable[PartitionEnds],
    now: float,
    bounds_s: Mapping[str, float],
) -> list[Hanging]:
    """The partitions whose LSO has stood for longer than their topic's bound (the
    longest transaction timeout its writers may have) with offsets above it, oldest
    first. A topic without a bound is not judged."""
    found = [
        Hanging(look.topic, look.partition, look.stable, look.high, now - stall.since, bound)
        for look in looks
        if look.high > look.stable
        and (bound := bounds_s.get(look.topic)) is not None
        and (stall := stalls.get(look.key)) is not None
        and stall.held
        and stall.stable == look.stable
        and now - stall.since > bound
    ]
    return sorted(found, key=lambda h: (-h.age_s, h.topic, h.partition))


def longest_transaction_timeout_s(
    sources: Sequence[KafkaSource], jobs: Sequence[SparkJob]
) -> float | None:
    """The longest ``transaction.timeout.ms`` of a Pipeline's transactional writers,
    in seconds: past it, the broker would have aborted any of their transactions. None
    when nothing of the Pipeline writes in transactions."""
    timeouts = [s.spec.transaction_timeout for s in sources] + [
        j.spec.sink.kafka.transaction_timeout_ms
        for j in jobs
        if j.spec.sink.kafka is not None
        and j.spec.sink.kafka.delivery is KafkaDelivery.EXACTLY_ONCE
    ]
    return max(timeouts) / 1000 if timeouts else None
