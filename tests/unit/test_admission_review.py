"""Admission review never crashes on malformed input and names fields (pure: the
lookups are plain functions over dicts)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from onceflow.control.admission import review

PIPELINES = {
    "orders": {
        "metadata": {"name": "orders", "namespace": "ns"},
        "spec": {"kafka": {"bootstrapServers": "kafka:9092"}, "exactlyOnce": "enabled"},
    }
}


def lookup(plural: str, namespace: str, name: str) -> dict[str, Any] | None:
    return PIPELINES.get(name) if plural == "pipelines" else None


def listing(plural: str, namespace: str) -> list[dict[str, Any]]:
    return []


values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(
    kind=st.sampled_from(["KafkaSource", "SparkJob", "Pipeline", "Other"]),
    spec=st.dictionaries(
        st.sampled_from(
            [
                "pipeline",
                "topic",
                "connector",
                "tasksMax",
                "input",
                "sink",
                "transform",
                "checkpoint",
                "kafka",
                "exactlyOnce",
                "zzz",
            ]
        ),
        values,
        max_size=6,
    ),
)
def test_random_objects_get_a_verdict_never_an_exception(kind: str, spec: dict[str, Any]) -> None:
    document = {
        "apiVersion": "onceflow.io/v1alpha1",
        "kind": kind,
        "metadata": {"name": "x", "namespace": "ns"},
        "spec": spec,
    }
    verdict = review(document, lookup, listing)
    assert verdict.allowed or all(verdict.problems)


def test_unknown_connector_is_rejected_with_the_field() -> None:
    document = {
        "apiVersion": "onceflow.io/v1alpha1",
        "kind": "KafkaSource",
        "metadata": {"name": "x", "namespace": "ns"},
        "spec": {"pipeline": "orders", "topic": "t", "connector": {"type": "nope"}},
    }
    verdict = review(document, lookup, listing)
    assert not verdict.allowed
    assert verdict.message.startswith("spec.connector.type: unknown connector 'nope'")


def test_a_prefix_another_pipeline_uses_is_rejected_naming_the_field() -> None:
    def pipeline(name: str, prefix: str | None, namespace: str = "ns") -> dict[str, Any]:
        spec: dict[str, Any] = {"kafka": {"bootstrapServers": "k:9092"}}
        if prefix:
            spec["transactionalIdPrefix"] = prefix
        return {
            "apiVersion": "onceflow.io/v1alpha1",
            "kind": "Pipeline",
            "metadata": {"name": name, "namespace": namespace},
            "spec": spec,
        }

    # The first one's prefix is the default, ns.orders.
    stored = [pipeline("orders", None), pipeline("orders", "eu", namespace="other")]

    def pipelines(plural: str, namespace: str) -> list[dict[str, Any]]:
        """Every namespace's Pipelines for "" (the cluster-wide listing)."""
        found = stored if plural == "pipelines" else []
        return [p for p in found if namespace in ("", p["metadata"]["namespace"])]

    verdict = review(pipeline("orders-eu", "ns.orders"), lookup, pipelines)
    assert verdict.message.startswith("spec.transactionalIdPrefix: 'ns.orders' is already")
    assert review(pipeline("orders", None), lookup, pipelines).allowed, "itself, on update"
    assert review(pipeline("orders-eu", None), lookup, pipelines).allowed
    across = review(pipeline("orders-eu", "eu"), lookup, pipelines)
    assert "already the prefix of Pipeline 'orders' in namespace 'other'" in across.message
    assert review(pipeline("orders", "eu", namespace="other"), lookup, pipelines).allowed
