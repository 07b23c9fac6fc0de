"""Each Spark checkpoint belongs to one job: two jobs on one place (or one inside the
other) are refused on both sides, claims are places of their namespace and paths of
every namespace, and another namespace's job is never named."""

from __future__ import annotations

from typing import Any

import pytest

from onceflow.api import parse_resources
from onceflow.api.spark import SparkJob
from onceflow.connectors.registry import load_connector
from onceflow.logic.topic_ownership import CHECKPOINT_CONFLICT, find_collisions
from onceflow.model.checkpoint_places import label_value, place_of
from tests.unit.test_topic_ownership import collisions, job, pipeline, summary


def on(document: dict[str, Any], checkpoint: dict[str, str]) -> dict[str, Any]:
    document["spec"]["checkpoint"] = checkpoint
    return document


def place(checkpoint: dict[str, str], ns: str = "default") -> Any:
    (parsed,) = parse_resources([on(job("j", "out", ["in"], ns=ns), checkpoint)])
    assert isinstance(parsed, SparkJob)
    return place_of(parsed)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ({"path": "s3a://bucket/ck"}, {"path": "s3a://bucket/ck/"}),
        ({"path": "s3a://bucket/ck"}, {"path": "S3A://Bucket/./x/../ck"}),
        ({"path": "/data/ck"}, {"path": "file:///data/ck"}),
        ({"path": "/data/ck"}, {"path": "/data//ck"}),
        ({"path": "ck"}, {"path": "./ck"}),
        ({"pvc": "ck"}, {"pvc": "ck"}),
    ],
)
def test_spellings_of_one_place_are_one_place(
    first: dict[str, str], second: dict[str, str]
) -> None:
    assert place(first) == place(second)
    assert label_value(place(first)) == label_value(place(second))


@pytest.mark.parametrize(
    ("first", "second", "overlap"),
    [
        ({"path": "s3a://bucket/ck"}, {"path": "s3a://bucket/ck/state"}, True),
        ({"path": "s3a://bucket/ck"}, {"path": "s3a://bucket/ck2"}, False),
        ({"path": "s3a://bucket/ck"}, {"path": "s3a://other/ck"}, False),
        ({"path": "s3a://bucket/ck"}, {"path": "gs://bucket/ck"}, False),
        ({"path": "/ck"}, {"path": "ck"}, False),  # absolute and relative to the run
        ({"pvc": "ck"}, {"path": "/ck"}, False),
    ],
)
def test_places_overlap_when_one_store_holds_one_inside_the_other(
    first: dict[str, str], second: dict[str, str], overlap: bool
) -> None:
    assert place(first).overlaps(place(second)) is overlap
    assert place(second).overlaps(place(first)) is overlap


def test_a_label_value_is_a_valid_kubernetes_label_value() -> None:
    value = label_value(place({"path": "s3a://bucket/" + "x" * 300}))
    assert len(value) <= 63 and value.isalnum()


def test_two_jobs_on_one_checkpoint_are_both_refused_naming_each_other() -> None:
    found = collisions(
        pipeline(),
        on(job("orders", "a.out", ["in"]), {"pvc": "ck"}),
        on(job("orders-v2", "b.out", ["in"]), {"pvc": "ck"}),
    )
    assert summary(found) == [
        ("SparkJob 'orders'", "spec.checkpoint.pvc", CHECKPOINT_CONFLICT),
        ("SparkJob 'orders-v2'", "spec.checkpoint.pvc", CHECKPOINT_CONFLICT),
    ]
    message = str(found[1].problem)
    assert message.startswith(
        "spec.checkpoint.pvc: checkpoint 'ck' is also that of SparkJob 'orders':"
    )
    assert "delete the old SparkJob first" in message


def test_a_checkpoint_inside_another_jobs_checkpoint_is_refused() -> None:
    found = collisions(
        pipeline(),
        on(job("outer", "a.out", ["in"]), {"path": "s3a://b/ck"}),
        on(job("inner", "b.out", ["in"]), {"path": "s3a://b/ck/inner"}),
    )
    assert [(c.resource.name, c.problem.reason) for c in found] == [
        ("outer", CHECKPOINT_CONFLICT),
        ("inner", CHECKPOINT_CONFLICT),
    ]
    assert "SparkJob 'outer' (this one lies inside it)" in str(found[1].problem)


def test_claims_of_one_name_in_two_namespaces_are_two_places_and_paths_are_one() -> None:
    claims = collisions(
        pipeline("team-a"),
        pipeline("team-b"),
        on(job("j", "a.out", ["in"], ns="team-a"), {"pvc": "checkpoint"}),
        on(job("j", "b.out", ["in"], ns="team-b"), {"pvc": "checkpoint"}),
    )
    assert [c for c in claims if c.problem.reason == CHECKPOINT_CONFLICT] == []
    paths = collisions(
        pipeline("team-a"),
        pipeline("team-b"),
        on(job("j", "a.out", ["in"], ns="team-a"), {"path": "s3a://shared/ck"}),
        on(job("secret-name", "b.out", ["in"], ns="team-b"), {"path": "s3a://shared/ck"}),
    )
    mine = [c for c in paths if c.resource.namespace == "team-a"]
    assert summary(mine) == [
        ("SparkJob 'j' in namespace 'team-a'", "spec.checkpoint.path", CHECKPOINT_CONFLICT)
    ]
    message = str(mine[0].problem)
    assert "is also that of a job of another namespace:" in message
    assert "team-b" not in message and "secret-name" not in message


def test_a_path_of_the_drivers_own_disk_is_shared_by_one_run_but_not_in_a_cluster() -> None:
    """``onceflow run`` runs every driver on one machine, where /tmp/ck is one place;
    in a cluster each driver's /tmp/ck is its own pod's (review of this change: two
    tenants' /tmp/ck were refused as one checkpoint)."""
    documents = [
        pipeline(),
        on(job("a", "a.out", ["in"]), {"path": "/tmp/ck"}),
        on(job("b", "b.out", ["in"]), {"path": "/tmp/ck"}),
    ]
    assert [c.problem.reason for c in collisions(*documents)] == [CHECKPOINT_CONFLICT] * 2
    in_cluster = find_collisions(
        parse_resources(documents), connectors=load_connector, pod_local_paths=True
    )
    assert in_cluster == []
    shared = [*documents[:2], on(job("c", "c.out", ["in"]), {"path": "s3a://b/ck"})]
    shared.append(on(job("d", "d.out", ["in"]), {"path": "s3a://b/ck"}))
    found = find_collisions(
        parse_resources(shared), connectors=load_connector, pod_local_paths=True
    )
    assert sorted(c.resource.name for c in found) == ["c", "d"]
