"""Which side of a standing collision in the topic graph is held back: the owner of
the topics runs on, whatever the order in which the sides were stored."""

from __future__ import annotations

from typing import Any

import pytest

from onceflow.api import parse_resource
from onceflow.api.errors import Problem
from onceflow.api.manifests import ResourceRef
from onceflow.api.pipeline import Pipeline
from onceflow.api.source import KafkaSource
from onceflow.api.spark import SparkJob
from onceflow.connectors.registry import load_connector
from onceflow.logic.topic_claims import claim_of, is_held
from onceflow.logic.topic_ownership import TOPIC_CONFLICT, Collision
from tests.unit.test_topic_ownership import job

A, B, C = (ResourceRef("KafkaSource", "ns", name) for name in ("a", "b", "c"))
EARLY, LATE = "2026-11-27T10:00:00Z", "2026-11-27T10:00:05Z"


def _collision(me: ResourceRef, *others: ResourceRef) -> Collision:
    return Collision(me, Problem("spec.topic", "shared", TOPIC_CONFLICT), others)


@pytest.mark.parametrize(
    ("owners", "created", "held"),
    [
        # The owner keeps its topic against a newcomer, and against an older object
        # that was edited to take it (its new claim is not recorded).
        ({A}, {A: EARLY, B: LATE}, {B}),
        ({B}, {A: EARLY, B: LATE}, {A}),
        # Neither owns it (both stored past the webhook): the older one goes first...
        (set(), {A: EARLY, B: LATE}, {B}),
        # ... and in the same second, the name decides: exactly one runs.
        (set(), {A: EARLY, B: EARLY}, {B}),
        # Both own it (stored before claims were recorded): the newer one is held.
        ({A, B}, {A: EARLY, B: LATE}, {B}),
    ],
)
def test_exactly_one_side_of_two_runs(
    owners: set[ResourceRef], created: dict[ResourceRef, str], held: set[ResourceRef]
) -> None:
    sides = [_collision(A, B), _collision(B, A)]
    found = {c.resource for c in sides if is_held(c, owners.__contains__, created)}
    assert found == held


def test_of_three_writers_only_the_first_runs() -> None:
    created = {A: EARLY, B: LATE, C: LATE}
    sides = [_collision(A, B, C), _collision(B, A, C), _collision(C, A, B)]
    held = {c.resource for c in sides if is_held(c, frozenset().__contains__, created)}
    assert held == {B, C}


def test_a_collision_with_no_other_side_is_always_held() -> None:
    """A job reading its own output needs nobody else to be wrong."""
    assert is_held(_collision(A), lambda ref: True, {A: EARLY})


def _source(**spec: object) -> KafkaSource:
    return KafkaSource.model_validate(
        {
            "metadata": {"name": "src", "namespace": "ns"},
            "spec": {"pipeline": "p", "topic": "t", "connector": {"type": "sequence"}, **spec},
        }
    )


def _pipeline(**spec: object) -> Pipeline:
    return Pipeline.model_validate(
        {
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"kafka": {"bootstrapServers": "k:9092"}, **spec},
        }
    )


def _claim(source: KafkaSource, pipeline: Pipeline | None = None) -> str:
    connector = load_connector(source.spec.connector.type)
    reads = connector.kafka_reads(source.spec.connector.config)
    return claim_of(source, pipeline or _pipeline(), {}, reads)


def _job(**changes: Any) -> SparkJob:
    document = job("j", "out", sources=["src"], ns="ns")
    document["spec"].update(changes)
    return parse_resource(document)  # type: ignore[return-value]


def test_a_claim_changes_with_anything_topics_and_ids_are_built_from() -> None:
    claim = _claim(_source())
    assert claim == _claim(_source())
    assert claim != _claim(_source(topic="u"))
    assert claim != _claim(_source(offsetsTopic="o"))
    assert claim != _claim(_source(), _pipeline(transactionalIdPrefix="x"))
    moved = _pipeline(kafka={"bootstrapServers": "elsewhere:9092"})
    assert claim != _claim(_source(), moved)
    upstream = {"topics": ["a"], "bootstrapServers": "up:9092"}
    mirrored = _claim(_source(connector={"type": "kafka", "config": upstream}))
    other_upstream = {**upstream, "topics": ["b"]}
    assert mirrored != _claim(_source(connector={"type": "kafka", "config": other_upstream}))


def test_an_edit_that_moves_no_topic_id_or_checkpoint_makes_no_new_claim() -> None:
    """A tuning edit is not judged against the whole graph again (every stored object
    read): only what the graph is built from counts."""
    claim = _claim(_source())
    tuned = {"type": "sequence", "config": {"streams": 3, "pollIntervalMs": 51}}
    assert claim == _claim(_source(connector=tuned, tasksMax=3))
    upstream = {"topics": ["a"], "bootstrapServers": "up:9092"}
    mirrored = _claim(_source(connector={"type": "kafka", "config": upstream}))
    batched = {**upstream, "batchSize": 10}
    assert mirrored == _claim(_source(connector={"type": "kafka", "config": batched}))


def test_a_jobs_claim_follows_its_inputs_sink_and_checkpoint() -> None:
    claim = claim_of(_job(), _pipeline(), {"src": "t"}, ())
    assert claim != claim_of(_job(), _pipeline(), {"src": "u"}, ())
    assert claim != claim_of(
        _job(checkpoint={"path": "/tmp/elsewhere"}), _pipeline(), {"src": "t"}, ()
    )
    sink = {"kafka": {"topic": "out2", "partitions": 2, "delivery": "exactlyOnce"}}
    assert claim != claim_of(_job(sink=sink), _pipeline(), {"src": "t"}, ())
    transform = {"sql": "SELECT value, key FROM input"}
    assert claim == claim_of(_job(transform=transform), _pipeline(), {"src": "t"}, ())
