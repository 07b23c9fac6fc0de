"""Preflight problems name the field and the fix, before any task starts."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from onceflow.api import KafkaSourceSpec
from onceflow.connectors.postgres import PostgresConnector
from onceflow.connectors.sequence import SequenceConnector
from onceflow.logic.preflight import preflight_source
from tests.support.connectors import AbortSecondBatchConnector, AtLeastOnceConnector


def _spec(**overrides: Any) -> KafkaSourceSpec:
    body: dict[str, Any] = {
        "pipeline": "p",
        "topic": "t",
        "connector": {"type": "sequence", "config": {"streams": 2}},
        **overrides,
    }
    return KafkaSourceSpec.model_validate(body)


def test_valid_source_has_no_problems() -> None:
    assert preflight_source(_spec(exactlyOnceSupport="required"), SequenceConnector()) == []


def test_required_exactly_once_with_an_unsupporting_connector() -> None:
    (problem,) = preflight_source(_spec(exactlyOnceSupport="required"), AtLeastOnceConnector())
    assert problem.field == "spec.exactlyOnceSupport"
    assert "exactlyOnceSupport: requested" in problem.message


def test_a_mode_that_cannot_be_exactly_once_is_refused_with_the_reason() -> None:
    config = {
        "mode": "timestamp+incrementing",
        "url": "postgresql://app@db/shop",
        "tables": ["orders"],
        "incrementingColumn": "id",
        "timestampColumn": "updated_at",
    }
    spec = _spec(exactlyOnceSupport="required", connector={"type": "postgres", "config": config})
    (problem,) = preflight_source(spec, PostgresConnector())
    assert problem.field == "spec.exactlyOnceSupport"
    assert "mode timestamp+incrementing re-reads updated rows" in problem.message
    config["mode"] = "incrementing"
    del config["timestampColumn"]
    spec = _spec(exactlyOnceSupport="required", connector={"type": "postgres", "config": config})
    assert preflight_source(spec, PostgresConnector()) == []


def test_requested_exactly_once_runs_an_unsupporting_connector() -> None:
    assert preflight_source(_spec(exactlyOnceSupport="requested"), AtLeastOnceConnector()) == []


def test_connector_boundary_needs_a_capable_connector() -> None:
    (problem,) = preflight_source(_spec(transactionBoundary="connector"), SequenceConnector())
    assert problem.field == "spec.transactionBoundary"
    assert "use poll or interval" in problem.message
    assert (
        preflight_source(_spec(transactionBoundary="connector"), AbortSecondBatchConnector()) == []
    )


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"streams": 0}, "spec.connector.config.streams"),
        ({"streams": "two"}, "spec.connector.config.streams"),
        ({"limit": -1}, "spec.connector.config.limit"),
        ({"batchSize": True}, "spec.connector.config.batchSize"),
        ({"strams": 2}, "spec.connector.config.strams"),
    ],
)
def test_connector_config_problems_name_the_config_key(config: dict[str, Any], field: str) -> None:
    spec = _spec(connector={"type": "sequence", "config": config})
    problems = preflight_source(spec, SequenceConnector())
    assert field in [p.field for p in problems]


def test_an_interval_too_close_to_the_transaction_timeout_is_refused_by_name() -> None:
    spec = {
        "pipeline": "p",
        "topic": "t",
        "connector": {"type": "sequence"},
        "transactionBoundary": "interval",
        "transactionBoundaryIntervalMs": 40000,
        "transactionTimeoutMs": 60000,
    }
    with pytest.raises(ValidationError, match=r"spec\.transactionBoundaryIntervalMs: must be at"):
        KafkaSourceSpec.model_validate(spec)
    assert KafkaSourceSpec.model_validate({**spec, "transactionTimeoutMs": 80000})
    # A spec from before the setting existed keeps working: the timeout follows it.
    del spec["transactionTimeoutMs"]
    assert KafkaSourceSpec.model_validate(spec).transaction_timeout == 80000
