"""Telling a hanging transaction from a slow one by looking at both partition ends over
time (logic/hanging_transactions.py)."""

from __future__ import annotations

from onceflow.logic.hanging_transactions import PartitionEnds, hanging, track


def _look(stable: int, high: int, partition: int = 0) -> PartitionEnds:
    return PartitionEnds("orders", partition, stable, high)


def test_a_last_stable_offset_that_stood_past_the_timeout_with_records_above_is_hanging() -> None:
    stalls = track({}, [_look(10, 15)], now=0.0)
    stalls = track(stalls, [_look(10, 40)], now=30.0)  # writes go on above the stall
    assert hanging(stalls, [_look(10, 40)], now=30.0, bounds_s={"orders": 60.0}) == []
    stalls = track(stalls, [_look(10, 90)], now=61.0)
    (found,) = hanging(stalls, [_look(10, 90)], now=61.0, bounds_s={"orders": 60.0})
    assert (found.topic, found.partition, found.stable, found.high) == ("orders", 0, 10, 90)
    assert found.age_s == 61.0
    assert found.describe() == (
        "orders/0: the last stable offset has stood at 10 for 61 s (longer than its writers "
        "may keep a transaction open: 60 s) with 80 offset(s) above it"
    )


def test_a_moving_last_stable_offset_starts_over() -> None:
    """Busy transactional writers keep the LSO below the high watermark all the time,
    but it moves: that is traffic, not a hang."""
    stalls = track({}, [_look(10, 15)], now=0.0)
    stalls = track(stalls, [_look(12, 20)], now=50.0)
    stalls = track(stalls, [_look(12, 25)], now=100.0)
    assert hanging(stalls, [_look(12, 25)], now=100.0, bounds_s={"orders": 60.0}) == []
    assert stalls[("orders", 0)].since == 50.0


def test_nothing_above_the_last_stable_offset_is_never_hanging() -> None:
    """An idle partition's LSO stands still for good, at its high watermark."""
    stalls = track({}, [_look(10, 10)], now=0.0)
    stalls = track(stalls, [_look(10, 10)], now=500.0)
    assert hanging(stalls, [_look(10, 10)], now=500.0, bounds_s={"orders": 60.0}) == []
    # A transaction opening later is timed from when it was first seen open.
    stalls = track(stalls, [_look(10, 12)], now=510.0)
    assert stalls[("orders", 0)].since == 510.0


def test_partitions_are_judged_apart_oldest_first_and_forgotten_when_not_looked_at() -> None:
    first = [_look(1, 5, partition=0), _look(7, 9, partition=1), _look(3, 3, partition=2)]
    stalls = track({}, first, now=0.0)
    stalls = track(stalls, [_look(1, 6, 0), _look(7, 9, 1), _look(3, 3, 2)], now=5.0)
    later = [_look(1, 6, 0), _look(7, 9, 1)]
    stalls = track(stalls, later, now=100.0)
    found = hanging(stalls, later, now=100.0, bounds_s={"orders": 60.0})
    assert [h.partition for h in found] == [0, 1]
    assert ("orders", 2) not in stalls
