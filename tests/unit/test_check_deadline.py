"""A connector's check that never returns does not hold the operator's worker."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from onceflow.api import KafkaSourceSpec
from onceflow.api.connector import ConfigProblem
from onceflow.connectors import checks as source_check
from onceflow.connectors.checks import SOURCE_SYSTEM_REFUSED, source_system_problems, within


def test_a_call_past_its_deadline_raises_and_one_within_returns_or_raises_its_own() -> None:
    never = threading.Event()
    with pytest.raises(TimeoutError):
        within(0.05, never.wait)
    assert within(1, lambda: 42) == 42
    with pytest.raises(KeyError):
        within(1, lambda: {}["missing"])


class SilentConnector:
    """A connector whose check waits for an answer that never comes."""

    def __init__(self) -> None:
        self.released = threading.Event()

    def check(
        self, config: Any, secrets: Any, *, shares_task_filesystem: bool
    ) -> list[ConfigProblem]:
        self.released.wait()
        return []


def test_a_check_that_never_returns_refuses_the_source_naming_the_connector(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(source_check, "CHECK_DEADLINE_S", 0.05)
    connector = SilentConnector()
    spec = KafkaSourceSpec.model_validate(
        {"pipeline": "p", "topic": "t", "connector": {"type": "silent", "config": {}}}
    )
    try:
        (problem,) = source_system_problems(
            spec,
            {},
            shares_task_filesystem=False,
            load=lambda name: connector,  # type: ignore[arg-type,return-value]
        )
    finally:
        connector.released.set()
    assert problem.field == "spec.connector" and problem.reason == SOURCE_SYSTEM_REFUSED
    assert "silent connector's check did not finish" in problem.message


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_call_into_a_source_system_is_asked_once_and_answered_on_a_later_pass() -> None:
    """The reconcile pass asks and moves on (security review High 3: silent systems
    held every reconcile worker); the answer is taken once, then asked afresh."""
    calls = source_check.SourceSystemCalls(workers=2, answer_within_s=0)
    started, done = threading.Event(), threading.Event()
    asked: list[int] = []

    def check() -> int:
        asked.append(1)
        started.set()
        done.wait(5)
        return 42

    with pytest.raises(source_check.StillAskingError):
        calls.answer("a", check)
    assert started.wait(5)
    with pytest.raises(source_check.StillAskingError):
        calls.answer("a", check)  # still running: not asked twice
    assert len(asked) == 1
    done.set()
    assert _answered(calls, "a", check) == 42
    with pytest.raises(source_check.StillAskingError):
        calls.answer("a", check)  # the answer was handed out: a new question
    with pytest.raises(source_check.StillAskingError):
        calls.answer("b", lambda: {}["missing"])
    with pytest.raises(KeyError):  # what the call raised, raised to the pass that takes it
        _answered(calls, "b", lambda: 0)


def test_a_quick_answer_is_taken_by_the_pass_that_asked() -> None:
    """Within ``answer_within_s`` the asking pass goes on with the answer (or what
    the call raised): it is not handed out again, and nobody is woken for it."""
    calls = source_check.SourceSystemCalls(workers=1, answer_within_s=5)
    woken: list[object] = []
    assert calls.answer("a", lambda: 5, then=woken.append) == 5
    with pytest.raises(ValueError):
        calls.answer("b", lambda: int("not a number"), then=woken.append)
    released = threading.Event()

    def slow() -> int:
        released.wait(5)
        return 6

    quick = source_check.SourceSystemCalls(workers=1, answer_within_s=0.05)
    with pytest.raises(source_check.StillAskingError):
        quick.answer("a", slow, then=woken.append)
    released.set()
    assert _answered(quick, "a", slow) == 6
    assert len(woken) == 1, "only the answer not given at once wakes the asker"


def _answered(calls: source_check.SourceSystemCalls, key: str, call: Any) -> Any:
    for _ in range(500):
        try:
            return calls.answer(key, call)
        except source_check.StillAskingError:
            threading.Event().wait(0.01)
    raise AssertionError("never answered")


def test_the_deadline_runs_from_the_calls_start_not_from_its_place_in_the_queue() -> None:
    """One thread, held by a silent system: the call queued behind it is not failed
    for that; the silent one is, once it has run past the deadline."""
    clock = Clock()
    calls = source_check.SourceSystemCalls(workers=1, deadline_s=60, clock=clock)
    started, never = threading.Event(), threading.Event()

    def silent() -> None:
        started.set()
        never.wait()

    try:
        with pytest.raises(source_check.StillAskingError):
            calls.answer("silent", silent)
        assert started.wait(5)
        with pytest.raises(source_check.StillAskingError):
            calls.answer("queued", lambda: 7)
        clock.now = 59
        with pytest.raises(source_check.StillAskingError):
            calls.answer("silent", silent)
        clock.now = 61
        with pytest.raises(source_check.StillAskingError):
            calls.answer("queued", lambda: 7)  # waiting for a thread, not running long
        with pytest.raises(TimeoutError):
            calls.answer("silent", silent)
        clock.now = 601
        with pytest.raises(TimeoutError):  # ten deadlines without a thread
            calls.answer("queued", lambda: 7)
    finally:
        never.set()


def test_the_asker_is_told_when_the_answer_is_there() -> None:
    calls = source_check.SourceSystemCalls(workers=1, answer_within_s=0)
    told, released = threading.Event(), threading.Event()

    def answering() -> int:
        released.wait(5)
        return 5

    with pytest.raises(source_check.StillAskingError):
        calls.answer("a", answering, then=lambda answered: told.set())
    released.set()
    assert told.wait(5)
    assert calls.answer("a", lambda: 6) == 5


def test_no_pass_waits_for_a_call_that_has_no_thread_to_run_on() -> None:
    """Silent systems holding every thread: a fresh question is only queued, so the
    asking pass moves on at once instead of waiting ``answer_within_s`` for nothing
    (a reconcile worker is never held for another tenant's silent system)."""
    calls = source_check.SourceSystemCalls(workers=1, answer_within_s=60)
    started, released = threading.Event(), threading.Event()

    def silent() -> None:
        started.set()
        released.wait(60)

    try:
        # Its own pass waits (a thread was free), on a thread of the test's.
        threading.Thread(target=calls.answer, args=("silent", silent), daemon=True).start()
        assert started.wait(5)
        moved_on = threading.Event()

        def ask() -> None:
            with pytest.raises(source_check.StillAskingError):
                calls.answer("queued", lambda: 7)
            moved_on.set()

        threading.Thread(target=ask, daemon=True).start()
        assert moved_on.wait(10), "the pass waited for a call no thread could start"
    finally:
        released.set()
