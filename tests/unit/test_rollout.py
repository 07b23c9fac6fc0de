"""Rollout decisions: one gated step at a time, in both directions."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onceflow.api import ExactlyOnceMode
from onceflow.logic.rollout import (
    ORDER,
    WorkloadObservation,
    decide_rollout,
    next_mode,
    resume_point,
)

D, P, E = ExactlyOnceMode.DISABLED, ExactlyOnceMode.PREPARING, ExactlyOnceMode.ENABLED


@pytest.mark.parametrize(
    ("current", "target", "expected"),
    [(D, E, P), (P, E, E), (E, D, P), (P, D, D), (D, D, D), (E, E, E), (D, P, P), (E, P, P)],
)
def test_next_mode_never_jumps(
    current: ExactlyOnceMode, target: ExactlyOnceMode, expected: ExactlyOnceMode
) -> None:
    assert next_mode(current, target) is expected


def _w(
    name: str, mode: ExactlyOnceMode | None, ready: bool, message: str = ""
) -> WorkloadObservation:
    return WorkloadObservation("KafkaSource", name, mode, ready, message)


def test_advances_only_when_every_workload_is_ready_in_the_current_mode() -> None:
    decision = decide_rollout(D, E, [_w("a", D, True), _w("b", D, True)])
    assert decision.advanced and decision.current is P


def test_waits_for_a_lagging_workload_and_names_it() -> None:
    decision = decide_rollout(P, E, [_w("a", P, True), _w("b", D, True, "1/3 tasks running")])
    assert not decision.advanced
    assert decision.current is P
    assert decision.waiting_for == ("KafkaSource/b",)
    assert "KafkaSource/b: 1/3 tasks running" in decision.detail
    assert decision.step == "waiting 1/2"  # the Step column: the sentence is the condition's


def test_unready_workload_in_the_right_mode_still_blocks() -> None:
    decision = decide_rollout(P, E, [_w("a", P, False)])
    assert decision.waiting_for == ("KafkaSource/a",)
    assert decision.detail.endswith(": KafkaSource/a"), "named even without a reason of its own"


def test_settled_when_at_target_and_all_ready() -> None:
    decision = decide_rollout(E, E, [_w("a", E, True)])
    assert decision.settled and decision.current is E
    assert decision.step == "stable"


@given(
    current=st.sampled_from(ORDER),
    target=st.sampled_from(ORDER),
    workloads=st.lists(
        st.tuples(st.sampled_from([*ORDER, None]), st.booleans(), st.text(max_size=300)),
        max_size=40,
    ),
)
def test_the_step_column_stays_short_whatever_the_workloads_say(
    current: ExactlyOnceMode,
    target: ExactlyOnceMode,
    workloads: list[tuple[ExactlyOnceMode | None, bool, str]],
) -> None:
    observed = [_w(f"w{i}", mode, ready, why) for i, (mode, ready, why) in enumerate(workloads)]
    assert len(decide_rollout(current, target, observed).step) <= 16


def test_empty_pipeline_walks_freely() -> None:
    assert decide_rollout(D, E, []).current is P


@given(
    current=st.sampled_from(ORDER),
    target=st.sampled_from(ORDER),
    workloads=st.lists(st.tuples(st.sampled_from([*ORDER, None]), st.booleans()), max_size=5),
)
def test_published_mode_moves_at_most_one_step(
    current: ExactlyOnceMode,
    target: ExactlyOnceMode,
    workloads: list[tuple[ExactlyOnceMode | None, bool]],
) -> None:
    observed = [_w(f"w{i}", mode, ready) for i, (mode, ready) in enumerate(workloads)]
    decision = decide_rollout(current, target, observed)
    assert abs(ORDER.index(decision.current) - ORDER.index(current)) <= 1
    if decision.current is not current:
        assert all(w.observed_mode is current and w.ready for w in observed)


@pytest.mark.parametrize(
    ("modes", "resumed"),
    [
        # Nothing ran: no consumer to switch, no producer to fence; the target at once.
        ((), ExactlyOnceMode.ENABLED),
        ((None, None), ExactlyOnceMode.ENABLED),
        ((None, ExactlyOnceMode.DISABLED), ExactlyOnceMode.DISABLED),
        ((ExactlyOnceMode.PREPARING, ExactlyOnceMode.ENABLED, None), ExactlyOnceMode.ENABLED),
        ((ExactlyOnceMode.PREPARING, ExactlyOnceMode.DISABLED), ExactlyOnceMode.PREPARING),
    ],
)
def test_a_pipeline_without_status_resumes_where_its_workloads_are(
    modes: tuple[ExactlyOnceMode | None, ...], resumed: ExactlyOnceMode
) -> None:
    workloads = [WorkloadObservation("KafkaSource", f"s{i}", m, True) for i, m in enumerate(modes)]
    assert resume_point(workloads, ExactlyOnceMode.ENABLED) is resumed


def test_a_walk_below_its_target_says_the_guarantee_is_not_in_force() -> None:
    decision = decide_rollout(D, E, [_w("a", D, True), _w("b", D, False, "driver pending")])
    assert decision.detail.startswith("enabled is not in force yet (workloads run disabled); ")
    assert "KafkaSource/b: driver pending" in decision.detail
