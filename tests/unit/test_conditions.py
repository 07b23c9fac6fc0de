"""Conditions over time: the progress deadline, and when a Warning event is due."""

from __future__ import annotations

from onceflow.api.status import Condition, ConditionStatus, ConditionType
from onceflow.control.pipeline import workloads_degraded
from onceflow.logic.conditions import (
    MESSAGE_LIMIT,
    PROGRESS_DEADLINE_EXCEEDED,
    newly_degraded,
    set_conditions,
)
from onceflow.logic.rollout import WorkloadObservation

T0, T1, T2 = "2026-11-25T00:00:00Z", "2026-11-25T00:09:59Z", "2026-11-25T00:10:01Z"
HEALTHY = (False, "Healthy", "")


def _progressing(
    now: str,
    conditions: list[Condition],
    degraded: tuple[bool, str, str] = HEALTHY,
    step: str = "driver starting",
) -> list[Condition]:
    return set_conditions(
        conditions,
        ready=(False, "Starting", step),
        progressing=(True, "Starting", step),
        degraded=degraded,
        now=now,
        observed_generation=1,
        deadline_s=600,
    )


def _degraded(conditions: list[Condition]) -> Condition:
    return next(c for c in conditions if c.type is ConditionType.DEGRADED)


def test_progressing_past_the_deadline_is_degraded_and_says_since_when() -> None:
    first = _progressing(T0, [])
    assert _degraded(_progressing(T1, first)).status is ConditionStatus.FALSE
    late = _degraded(_progressing(T2, first))
    assert late.status is ConditionStatus.TRUE and late.reason == PROGRESS_DEADLINE_EXCEEDED
    assert f"no progress since {T0}" in late.message and "driver starting" in late.message


def test_progress_restarts_the_deadline() -> None:
    first = _progressing(T0, [])
    moved = _progressing(T1, first, step="2 of 3 tasks ready")
    assert _degraded(_progressing(T2, moved, step="2 of 3 tasks ready")).status is (
        ConditionStatus.FALSE
    ), "the deadline counts from the last progress"


def test_a_reason_of_its_own_wins_over_the_deadline() -> None:
    first = _progressing(T0, [])
    own = _degraded(_progressing(T2, first, degraded=(True, "FencingFailed", "broker")))
    assert own.reason == "FencingFailed"


def test_settling_ends_the_deadline() -> None:
    late = _progressing(T2, _progressing(T0, []))
    settled = set_conditions(
        late,
        ready=(True, "Running", ""),
        progressing=(False, "Running", ""),
        degraded=HEALTHY,
        now=T2,
        observed_generation=1,
        deadline_s=600,
    )
    assert _degraded(settled).status is ConditionStatus.FALSE


def test_an_event_is_due_when_degraded_turns_true_or_changes_reason() -> None:
    healthy = _progressing(T0, [])
    late = _progressing(T2, healthy)
    assert newly_degraded(healthy, late) is not None
    assert newly_degraded(late, late) is None, "not again for the same finding"
    assert newly_degraded(late, healthy) is None
    retry = _progressing(T1, healthy, degraded=(True, "FencingFailed", "retrying in 5s"))
    later = _progressing(T2, retry, degraded=(True, "FencingFailed", "retrying in 10s"))
    assert newly_degraded(retry, later) is None, "a countdown is no news"


def test_a_pipeline_names_its_degraded_workloads() -> None:
    ok = WorkloadObservation("KafkaSource", "a", None, True)
    bad = WorkloadObservation("SparkJob", "b", None, False, "", "Forbidden: quota")
    assert workloads_degraded([ok]) == HEALTHY
    assert workloads_degraded([ok, bad]) == (
        True,
        "WorkloadDegraded",
        "SparkJob/b: Forbidden: quota",
    )


def test_a_long_message_is_cut_to_what_a_condition_holds() -> None:
    many = _progressing(T0, [], degraded=(True, "WorkloadDegraded", "x" * (MESSAGE_LIMIT + 10)))
    assert len(_degraded(many).message) == MESSAGE_LIMIT


def test_a_workload_not_ready_because_degraded_shows_why_in_ready() -> None:
    """`kubectl get`'s Reason column reads Ready: a deadline passed or a failing pod must
    show there, not only in `kubectl describe`."""
    first = _progressing(T0, [])
    late = _progressing(T2, first)
    ready = next(c for c in late if c.type is ConditionType.READY)
    assert ready.reason == PROGRESS_DEADLINE_EXCEEDED
    failing = _progressing(T1, first, degraded=(True, "ContainerFailing", "pod x: exit 1"))
    ready = next(c for c in failing if c.type is ConditionType.READY)
    assert (ready.reason, ready.message) == ("ContainerFailing", "pod x: exit 1")
