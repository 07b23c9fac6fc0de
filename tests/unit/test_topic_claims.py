"""Which side of a standing collision in the topic graph is held back: the owner of
the topics runs on, whatever the order in which the sides were stored."""

from __future__ import annotations

import pytest

from onceflow.api.errors import Problem
from onceflow.api.manifests import ResourceRef
from onceflow.api.pipeline import Pipeline
from onceflow.api.source import KafkaSource
from onceflow.logic.topic_claims import claim_of, is_held
from onceflow.logic.topic_ownership import TOPIC_CONFLICT, Collision

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


def test_a_claim_changes_with_anything_topics_and_ids_are_built_from() -> None:
    claim = claim_of(_source(), _pipeline(), {})
    assert claim == claim_of(_source(), _pipeline(), {})
    assert claim != claim_of(_source(topic="u"), _pipeline(), {})
    assert claim != claim_of(_source(offsetsTopic="o"), _pipeline(), {})
    assert claim != claim_of(_source(), _pipeline(transactionalIdPrefix="x"), {})
    moved = _pipeline(kafka={"bootstrapServers": "elsewhere:9092"})
    assert claim != claim_of(_source(), moved, {})
    assert claim != claim_of(_source(), _pipeline(), {"src": "t"})
