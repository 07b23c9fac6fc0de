"""The fault campaign's pure parts: its schedule and how recovery is read from a
timeline (tests/campaign)."""

from __future__ import annotations

import pytest

from tests.campaign.kinds import NEEDS_ROOT, SPARK, FaultKind, Strike, available
from tests.campaign.recovery import Timeline, percentile, recovery_by_kind, recovery_s
from tests.campaign.schedule import SLOW, fault_schedule


def test_every_kind_is_struck_once_before_any_is_struck_twice() -> None:
    kinds = available(root=True, spark=True)
    schedule = fault_schedule(kinds, 200, seed=7)
    assert len(schedule) == 200
    assert set(schedule[: len(kinds)]) == set(FaultKind)
    assert fault_schedule(kinds, 200, seed=7) == schedule, "reproducible from its seed"
    assert fault_schedule(kinds, 200, seed=8) != schedule


def test_slow_kinds_are_drawn_less_often_after_the_first_round() -> None:
    kinds = available(root=True, spark=True)
    rest = fault_schedule(kinds, 5000, seed=1)[len(kinds) :]
    slow = sum(kind in SLOW for kind in rest) / len(SLOW)
    other = [k for k in kinds if k not in SLOW and k is not FaultKind.TASK_KILL]
    quick = sum(kind in other for kind in rest) / len(other)
    assert 0.05 < slow / quick < 0.2
    assert 2 < rest.count(FaultKind.TASK_KILL) / quick < 4


def test_fewer_faults_than_kinds_is_refused() -> None:
    with pytest.raises(ValueError, match="each of 14 kinds once"):
        fault_schedule(available(root=True, spark=True), 5, seed=1)


def test_kinds_leave_out_what_the_machine_or_campaign_cannot_strike() -> None:
    assert not NEEDS_ROOT & set(available(root=False, spark=True))
    assert not SPARK & set(available(root=True, spark=False))
    assert len(available(root=False, spark=True)) >= 10, "the acceptance's ten kinds, as non-root"


def _strike(kind: FaultKind, struck: float, cleared: float, landed: bool = True) -> Strike:
    return Strike(kind, "p", struck, cleared, landed, "")


ROWS = Timeline("p", progress=[(0.0, 0), (1, 10), (2, 20), (3, 20), (4, 20), (5, 25), (6, 30)])
"""A table's output: rows counted, no produce times."""


def test_a_tables_recovery_runs_from_the_fault_clearing_to_more_rows() -> None:
    assert recovery_s(_strike(FaultKind.TASK_KILL, 2.5, 2.5), ROWS) == 2.5
    paused = _strike(FaultKind.BROKER_PAUSE, 1.5, 4.2)  # cleared while output stood still
    assert recovery_s(paused, ROWS) == pytest.approx(0.8)
    assert recovery_s(_strike(FaultKind.TASK_KILL, 6.5, 6.5), ROWS) is None


def test_a_topics_recovery_waits_for_a_record_made_after_the_fault() -> None:
    """Records made before a kill and only read after it are no recovery: the time runs
    until one produced after it is visible."""
    topic = Timeline(
        "p",
        progress=[(1.0, 10), (2.0, 20), (3.0, 30), (4.0, 40)],
        newest=[(1.0, 0.9), (2.0, 1.4), (3.0, 1.45), (4.0, 3.2)],
    )
    assert recovery_s(_strike(FaultKind.TASK_KILL, 1.5, 1.5), topic) == pytest.approx(2.5)
    assert recovery_s(_strike(FaultKind.TASK_KILL, 3.5, 3.5), topic) is None


def test_recovery_by_kind_counts_landed_strikes_only_and_takes_nearest_rank_p99() -> None:
    strikes = [
        _strike(FaultKind.TASK_KILL, 2.5, 2.5),
        _strike(FaultKind.TASK_KILL, 0.5, 0.5),
        _strike(FaultKind.TASK_KILL, 3.5, 3.5, landed=False),
        _strike(FaultKind.DRIVER_KILL, 6.5, 6.5),
    ]
    rows = {row.kind: row for row in recovery_by_kind(strikes, {"p": ROWS})}
    kill = rows[FaultKind.TASK_KILL]
    assert (kill.struck, kill.landed, kill.recovered) == (3, 2, 2)
    assert kill.median_s == pytest.approx(1.5) and kill.p99_s == pytest.approx(2.5)
    driver = rows[FaultKind.DRIVER_KILL]
    assert (driver.recovered, driver.median_s) == (0, None)
    assert percentile([1.0, 2.0, 3.0], 0.5) == 2.0
