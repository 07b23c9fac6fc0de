"""Generation planning: when to start a generation and whom to fence first."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onceflow.api import ExactlyOnceMode
from onceflow.logic.generations import (
    GenerationAction,
    GenerationPlan,
    GenerationRecord,
    ids_to_fence,
    plan_generation,
)

D, P, E = ExactlyOnceMode.DISABLED, ExactlyOnceMode.PREPARING, ExactlyOnceMode.ENABLED


def _plan(
    record: GenerationRecord | None, count: int, mode: ExactlyOnceMode, fp: str
) -> GenerationPlan:
    return plan_generation(
        record, prefix="ns.p", source="src", task_count=count, mode=mode, desired_fingerprint=fp
    )


def test_first_generation_starts_fenced_with_nothing_to_fence() -> None:
    plan = _plan(None, 3, E, "a")
    assert plan.action is GenerationAction.START_FIRST
    assert (plan.record.generation, plan.record.fenced_generation) == (1, 1)
    assert plan.fence_ids == ()


def test_unchanged_tasks_keep_the_generation() -> None:
    record = GenerationRecord(4, 4, 3, E, "a")
    assert _plan(record, 3, E, "a").action is GenerationAction.KEEP


def test_changed_tasks_start_the_next_generation_and_fence_all_old_ids() -> None:
    plan = _plan(GenerationRecord(4, 4, 3, E, "a"), 2, E, "b")
    assert plan.action is GenerationAction.NEW_GENERATION
    assert plan.record.generation == 5
    assert plan.record.fencing_pending
    assert plan.fence_ids == ("ns.p-src-0", "ns.p-src-1", "ns.p-src-2")
    assert not plan.predecessors_must_be_gone


def test_crash_after_intent_replans_the_same_fencing() -> None:
    intent = _plan(GenerationRecord(4, 4, 3, E, "a"), 2, E, "b").record
    again = _plan(intent, 2, E, "b")
    assert again.action is GenerationAction.FINISH_FENCING
    assert again.record == intent
    assert again.fence_ids == ("ns.p-src-0", "ns.p-src-1", "ns.p-src-2")
    assert again.record.with_fenced().fencing_pending is False


def test_first_transactional_generation_waits_for_non_transactional_predecessors() -> None:
    plan = _plan(GenerationRecord(2, 2, 2, P, "a"), 2, E, "b")
    assert plan.predecessors_must_be_gone
    assert plan.fence_ids == ("ns.p-src-0", "ns.p-src-1")


@pytest.mark.parametrize(
    ("old_count", "old_mode", "new_count", "new_mode", "expected"),
    [
        (1, E, 1, E, 0),  # the successor's own init fences the only id
        (1, E, 1, P, 1),  # a non-transactional successor initialises nothing
        (1, E, 2, E, 1),
        (3, E, 2, E, 3),
        (2, D, 2, D, 0),  # nothing transactional on either side
        (2, P, 3, E, 2),
        (0, E, 3, E, 0),
    ],
)
def test_ids_to_fence(
    old_count: int,
    old_mode: ExactlyOnceMode,
    new_count: int,
    new_mode: ExactlyOnceMode,
    expected: int,
) -> None:
    assert len(ids_to_fence("x", "s", old_count, old_mode, new_count, new_mode)) == expected


@given(
    generation=st.integers(1, 10_000),
    lag=st.integers(0, 1),
    count=st.integers(1, 100),
    mode=st.sampled_from(list(ExactlyOnceMode)),
    fp=st.text(min_size=1, max_size=20),
)
def test_record_survives_storage(
    generation: int, lag: int, count: int, mode: ExactlyOnceMode, fp: str
) -> None:
    record = GenerationRecord(generation, generation - lag, count, mode, fp, count + 1, mode)
    assert GenerationRecord.from_json(record.to_json()) == record
