"""The operator's metrics as the code that feeds them sees them: condition counts kept
across rewrites and deletions, a rollout step timed from its pass to the pass that
finds it done, and passes counted by how they end."""

from __future__ import annotations

import uuid

from prometheus_client import REGISTRY

from onceflow.api.pipeline import ExactlyOnceMode
from onceflow.api.status import Condition, ConditionStatus, ConditionType
from onceflow.control.operator_metrics import ConditionCounts, RolloutSteps, count_pass
from onceflow.logic.requeue import Outcome
from onceflow.logic.rollout import RolloutDecision

E, P = ExactlyOnceMode.ENABLED, ExactlyOnceMode.PREPARING


def _ready(status: ConditionStatus) -> list[Condition]:
    return [
        Condition(
            type=ConditionType.READY,
            status=status,
            reason="R",
            last_transition_time="2026-11-28T00:00:00Z",
        )
    ]


def _objects(kind: str, status: str) -> float:
    labels = {"kind": kind, "condition": "Ready", "status": status}
    return REGISTRY.get_sample_value("onceflow_operator_objects", labels) or 0.0


def test_each_object_counts_once_in_its_latest_condition_and_not_after_deletion() -> None:
    kind = f"Kind{uuid.uuid4().hex[:6]}"  # a kind of its own: the registry is global
    counts = ConditionCounts()
    counts.written(kind, "ns", "a", _ready(ConditionStatus.FALSE))
    counts.written(kind, "ns", "b", _ready(ConditionStatus.FALSE))
    counts.written(kind, "ns", "a", _ready(ConditionStatus.TRUE))
    counts.written(kind, "ns", "a", _ready(ConditionStatus.TRUE))
    assert (_objects(kind, "True"), _objects(kind, "False")) == (1, 1)
    counts.deleted(kind, "ns", "b")
    counts.deleted(kind, "ns", "never-written")
    assert (_objects(kind, "True"), _objects(kind, "False")) == (1, 0)


def _decision(current: ExactlyOnceMode, waiting: int, advanced: bool) -> RolloutDecision:
    return RolloutDecision(current, "", "", tuple(f"w{i}" for i in range(waiting)), advanced)


def _steps(to: str) -> tuple[float, float]:
    labels = {"to": to}
    taken = REGISTRY.get_sample_value("onceflow_operator_rollout_steps_total", labels) or 0.0
    timed = REGISTRY.get_sample_value("onceflow_operator_rollout_step_seconds_count", labels)
    return taken, timed or 0.0


def test_a_rollout_step_is_timed_until_every_workload_runs_its_mode() -> None:
    steps, key = RolloutSteps(), ("ns", uuid.uuid4().hex)
    before = _steps("enabled")
    steps.passed(key, P, _decision(E, 0, advanced=True))  # preparing -> enabled
    steps.passed(key, E, _decision(E, 2, advanced=False))  # waiting for two
    assert _steps("enabled") == (before[0] + 1, before[1])
    steps.passed(key, E, _decision(E, 0, advanced=False))  # done
    steps.passed(key, E, _decision(E, 0, advanced=False))  # stable: nothing more
    assert _steps("enabled") == (before[0] + 1, before[1] + 1)


def test_every_pass_is_counted_by_kind_and_outcome() -> None:
    labels = {"kind": "KafkaSource", "outcome": "retry"}
    before = REGISTRY.get_sample_value("onceflow_operator_reconciles_total", labels) or 0.0
    count_pass("kafkasources", Outcome.RETRY, 0.01)
    after = REGISTRY.get_sample_value("onceflow_operator_reconciles_total", labels)
    assert after == before + 1
