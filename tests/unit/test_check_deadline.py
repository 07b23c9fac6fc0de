"""A connector's check that never returns does not hold the operator's worker."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from onceflow.api import KafkaSourceSpec
from onceflow.api.connector import ConfigProblem
from onceflow.runtime import source_check
from onceflow.runtime.source_check import SOURCE_SYSTEM_REFUSED, source_system_problems, within


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
