"""Manifest parsing: every invalid field is named; nothing else ever escapes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from onceflow.api import InvalidResourceError, KafkaSource, parse_resource


def _source(**spec: Any) -> dict[str, Any]:
    base = {"pipeline": "p", "topic": "t", "connector": {"type": "sequence"}}
    return {
        "apiVersion": "onceflow.io/v1alpha1",
        "kind": "KafkaSource",
        "metadata": {"name": "s"},
        "spec": {**base, **spec},
    }


def test_valid_source_gets_defaults() -> None:
    source = parse_resource(_source())
    assert isinstance(source, KafkaSource)
    assert source.spec.tasks_max == 1
    assert source.spec.transaction_boundary.value == "poll"


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"tasksMax": -1}, "spec.tasksMax"),
        ({"tasksMax": 0}, "spec.tasksMax"),
        ({"transactionBoundary": "sometimes"}, "spec.transactionBoundary"),
        ({"exactlyOnceSupport": "maybe"}, "spec.exactlyOnceSupport"),
        ({"transactionBoundaryIntervalMs": 100}, "spec.transactionBoundaryIntervalMs"),
        (
            {"transactionBoundary": "interval", "transactionBoundaryIntervalMs": 0},
            "spec.transactionBoundaryIntervalMs",
        ),
        ({"topic": ""}, "spec.topic"),
        ({"pipeline": ""}, "spec.pipeline"),
        ({"taskMax": 3}, "spec.taskMax"),
        ({"connector": {"config": {}}}, "spec.connector.type"),
    ],
)
def test_invalid_source_names_the_field(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidResourceError) as error:
        parse_resource(_source(**spec))
    assert field in str(error.value)


def test_wrong_api_version_and_kind_are_named() -> None:
    with pytest.raises(InvalidResourceError, match="apiVersion"):
        parse_resource({**_source(), "apiVersion": "v1"})
    with pytest.raises(InvalidResourceError, match="kind"):
        parse_resource({**_source(), "kind": "KafkaSink"})


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)


@settings(max_examples=300)
@given(
    spec=st.dictionaries(
        st.sampled_from(
            [
                "pipeline",
                "topic",
                "tasksMax",
                "connector",
                "transactionBoundary",
                "transactionBoundaryIntervalMs",
                "exactlyOnceSupport",
                "offsetsTopic",
                "x",
            ]
        ),
        json_values,
    ),
    kind=st.sampled_from(["KafkaSource", "Pipeline", "Other", None]),
)
def test_random_specs_are_accepted_or_rejected_with_fields_never_crash(
    spec: dict[str, Any], kind: str | None
) -> None:
    document = {
        "apiVersion": "onceflow.io/v1alpha1",
        "kind": kind,
        "metadata": {"name": "r"},
        "spec": spec,
    }
    try:
        parse_resource(document)
    except InvalidResourceError as error:
        assert error.problems and all(p.message for p in error.problems)
