"""Admission review never crashes on malformed input and names fields (pure: the
lookups are plain functions over dicts)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from onceflow.control.admission import review
from onceflow.logic.tenant_policy import TenantPolicy

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


def _pipeline(name: str, prefix: str | None, namespace: str = "ns") -> dict[str, Any]:
    spec: dict[str, Any] = {"kafka": {"bootstrapServers": "k:9092"}}
    if prefix:
        spec["transactionalIdPrefix"] = prefix
    return {
        "apiVersion": "onceflow.io/v1alpha1",
        "kind": "Pipeline",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def _stored(*documents: dict[str, Any]) -> Any:
    """A listing over ``documents``: every namespace's for "" (cluster-wide)."""

    def listing(plural: str, namespace: str) -> list[dict[str, Any]]:
        kinds = {"pipelines": "Pipeline", "kafkasources": "KafkaSource", "sparkjobs": "SparkJob"}
        return [
            d
            for d in documents
            if d["kind"] == kinds[plural] and namespace in ("", d["metadata"]["namespace"])
        ]

    return listing


def test_a_prefix_outside_the_pipelines_namespace_is_refused_unless_the_platform_allows_it() -> (
    None
):
    """Security review #6: with any prefix allowed, a tenant could take another
    namespace's default prefix before that namespace's Pipeline existed, and hold it."""
    listing = _stored()
    squat = review(_pipeline("squat", "tenant-b.orders"), lookup, listing)
    assert squat.message == (
        "spec.transactionalIdPrefix: 'tenant-b.orders' does not start with this namespace's "
        "name and a dot (ns.): each namespace's prefixes are its own, so that no tenant can "
        "take another's transactional ids first; use 'ns.<name>', or leave it unset for the "
        "default (a platform admin may allow any prefix: chart value "
        "tenants.anyTransactionalIdPrefix)"
    ), squat
    assert review(_pipeline("orders", "ns.orders-v2"), lookup, listing).allowed
    assert review(_pipeline("orders", None), lookup, listing).allowed, "the default"
    assert not review(_pipeline("orders", "ns"), lookup, listing).allowed, "ns.<something>"
    assert not review(_pipeline("orders", "nsx.orders"), lookup, listing).allowed
    assert review(_pipeline("squat", "tenant-b.orders"), lookup, listing, ANY_PREFIX).allowed


ANY_PREFIX = TenantPolicy(any_prefix=True)
"""A cluster of one team: prefixes are free, and collide across namespaces."""


def test_a_prefix_of_another_namespace_on_the_cluster_is_rejected_without_naming_it() -> None:
    # The first one's prefix is the default, ns.orders.
    listing = _stored(_pipeline("orders", None), _pipeline("orders", "eu", namespace="tenant-b"))
    across = review(_pipeline("orders-eu", "eu"), lookup, listing, ANY_PREFIX)
    assert across.message.startswith(
        "spec.transactionalIdPrefix: 'eu' is also the transactional-id prefix of a Pipeline of "
        "another namespace"
    ), across
    assert "tenant-b" not in across.message
    # Names are unique per kind in a namespace, so its ids cannot collide there.
    assert review(_pipeline("orders-eu", "ns.orders"), lookup, listing, ANY_PREFIX).allowed
    assert review(_pipeline("orders", None), lookup, listing).allowed, "itself, on update"
    theirs = _pipeline("orders", "eu", namespace="tenant-b")
    assert review(theirs, lookup, listing, ANY_PREFIX).allowed
    elsewhere = _pipeline("orders-eu", "eu")
    elsewhere["spec"]["kafka"]["bootstrapServers"] = "another-cluster:9092"
    assert review(elsewhere, lookup, listing, ANY_PREFIX).allowed, "ids unique per cluster"


def test_a_pipeline_change_is_refused_for_what_it_does_to_its_workloads() -> None:
    """A new bootstrap moves every topic of the Pipeline's workloads onto a cluster
    where another namespace's source already writes one of them."""
    theirs = _pipeline("orders", None, namespace="other")
    source = {
        "apiVersion": "onceflow.io/v1alpha1",
        "kind": "KafkaSource",
        "spec": {"pipeline": "orders", "topic": "orders.raw", "connector": {"type": "sequence"}},
    }
    mine = _pipeline("orders", None)
    mine["spec"]["kafka"]["bootstrapServers"] = "another-cluster:9092"
    listing = _stored(
        theirs,
        {**source, "metadata": {"name": "src", "namespace": "other"}},
        mine,
        {**source, "metadata": {"name": "src", "namespace": "ns"}},
    )
    assert review(mine, lookup, listing).allowed
    moved = _pipeline("orders", None)
    problems = review(moved, lookup, listing).problems
    assert problems and problems[0].startswith("KafkaSource 'src' in namespace 'ns': "), problems
    assert "topic 'orders.raw' belongs to another namespace" in problems[0], problems


def test_an_update_is_refused_only_for_problems_it_brings() -> None:
    """An intruder stored past the webhook must not freeze its victim: the owner can
    still edit itself, while a new writer of the topic is refused."""

    def source(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
        return {
            "apiVersion": "onceflow.io/v1alpha1",
            "kind": "KafkaSource",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "pipeline": "orders",
                "topic": "orders.raw",
                "connector": {"type": "sequence"},
                **spec,
            },
        }

    listing = _stored(
        _pipeline("orders", None),
        _pipeline("orders", None, namespace="tenant-b"),
        source("owner", "ns"),
        source("intruder", "tenant-b"),
    )
    assert review(source("owner", "ns", tasksMax=4), lookup, listing).allowed
    refused = review(source("another", "ns"), lookup, listing)
    assert "is also the output topic of KafkaSource 'owner'" in refused.message, refused
    assert "tenant-b" not in refused.message


def test_a_mirror_that_would_feed_a_job_its_own_output_is_refused() -> None:
    """The webhook asks the mirror what it reads (the operator's connector loader)."""
    job = {
        "apiVersion": "onceflow.io/v1alpha1",
        "kind": "SparkJob",
        "metadata": {"name": "j", "namespace": "ns"},
        "spec": {
            "pipeline": "orders",
            "input": {"topics": ["in"]},
            "transform": {"sql": "SELECT key, value FROM input"},
            "sink": {"kafka": {"topic": "out", "partitions": 1}},
            "checkpoint": {"path": "/tmp/j"},
        },
    }
    listing = _stored(_pipeline("orders", None), job)  # on k:9092
    config = {"topics": ["out"], "bootstrapServers": "kafka-dr:9092"}
    mirror = {
        "apiVersion": "onceflow.io/v1alpha1",
        "kind": "KafkaSource",
        "metadata": {"name": "m", "namespace": "ns"},
        "spec": {
            "pipeline": "orders",
            "topic": "in",
            "connector": {"type": "kafka", "config": config},
        },
    }
    on_another_cluster = review(mirror, lookup, listing)
    assert on_another_cluster.allowed, on_another_cluster
    config["bootstrapServers"] = "PLAINTEXT://k"
    refused = review(mirror, lookup, listing)
    assert refused.problems == [
        "spec.topic: topic 'in' is read by SparkJob 'j', which writes 'out', read by this "
        "source (spec.connector.config.topics[0]): records go round this cycle without end; "
        "write to a topic no workload of the cycle reads"
    ]


def _requesting(kind: str, state: str, request_id: str = "c2") -> dict[str, Any]:
    """A KafkaSource with an offsets change, or a SparkJob with an input reset."""
    if kind == "KafkaSource":
        spec: dict[str, Any] = {
            "topic": "orders.raw",
            "connector": {"type": "sequence"},
            "offsetsChange": {"id": request_id, "reset": True},
        }
    else:
        spec = {
            "input": {"topics": ["orders.raw"]},
            "transform": {"sql": "SELECT key, value FROM input"},
            "sink": {"kafka": {"topic": "orders.out", "partitions": 1}},
            "checkpoint": {"path": "/tmp/w"},
            "inputReset": {
                "id": request_id,
                "startingOffsets": "earliest",
                "acknowledgeReplays": True,
            },
        }
    return {
        "apiVersion": "onceflow.io/v1alpha1",
        "kind": kind,
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": {"pipeline": "orders", "state": state, **spec},
    }


@pytest.mark.parametrize(
    ("kind", "wire"), [("KafkaSource", "offsetsChange"), ("SparkJob", "inputReset")]
)
def test_a_new_request_asked_of_a_running_workload_is_refused_before_it_is_stored(
    kind: str, wire: str
) -> None:
    """The operator refuses it for good in status; admission says so to kubectl apply."""
    running = {**_requesting(kind, "running", "c1"), "status": {wire: {"id": "c1"}}}
    refused = review(_requesting(kind, "running"), lookup, listing, old=running)
    assert f"spec.{wire}:" in refused.message and "set spec.state: stopped" in refused.message
    assert review(_requesting(kind, "stopped"), lookup, listing, old=running).allowed
    stored = _requesting(kind, "stopped")
    assert review(_requesting(kind, "running"), lookup, listing, old=stored).allowed, (
        "resuming with the handled request still in the spec"
    )
    remembered = {
        **_requesting(kind, "running", "c3"),
        "status": {wire: {"id": "c3", "earlier": ["c2"]}},
    }
    assert review(_requesting(kind, "running"), lookup, listing, old=remembered).allowed, (
        "an earlier request brought back from Git changes nothing"
    )


@pytest.mark.parametrize("kind", ["KafkaSource", "SparkJob"])
def test_a_workload_created_with_a_request_is_warned_about_not_refused(kind: str) -> None:
    """A manifest that still carries a handled request (applied again in a new cluster,
    or after kubectl delete) must still apply; its status will say Refused."""
    created = review(_requesting(kind, "running"), lookup, listing)
    assert created.allowed and "recorded Refused and never applied" in created.warnings[0]
    unknown = {**_requesting(kind, "running"), "spec": {**_requesting(kind, "running")["spec"]}}
    unknown["spec"]["pipeline"] = "not-yet"
    assert review(unknown, lookup, listing, old=_requesting(kind, "running", "c1")).allowed, (
        "its Pipeline not stored yet (applied later in the same apply): the state is unknown"
    )


def test_a_request_is_let_through_while_the_pipeline_stops_the_workload() -> None:
    stopped = {
        "orders": {
            **PIPELINES["orders"],
            "spec": {**PIPELINES["orders"]["spec"], "state": "stopped"},
        }
    }

    def stopped_lookup(plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        return stopped.get(name) if plural == "pipelines" else None

    before = _requesting("KafkaSource", "running", "c1")
    assert review(
        _requesting("KafkaSource", "running"), stopped_lookup, listing, old=before
    ).allowed
    assert not review(_requesting("KafkaSource", "running"), lookup, listing, old=before).allowed
