"""The topic and transactional-id graph judged against what the API server holds
(``logic.topic_ownership``), for the admission webhook and the reconcilers.

Kafka clusters know nothing of namespaces, so every stored Pipeline, KafkaSource and
SparkJob the operator can see takes part. The webhook refuses an object that would
break the graph; a reconciler marks Degraded an object that breaks it all the same
(stored while the webhook was not installed, or through another namespace it could
not compare). In a standing collision the object stored first keeps its topics and
ids: a newcomer cannot stop another tenant's running workload by copying its topic.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from onceflow.api import InvalidResourceError, Pipeline, parse_resource
from onceflow.api.errors import Problem, labelled
from onceflow.api.manifests import Resource, ResourceRef
from onceflow.control.kube import ALL_NAMESPACES, KubeClient, Obj
from onceflow.control.workloads import invalid_workload
from onceflow.logic.topic_ownership import GRAPH_REASONS, find_collisions

logger = logging.getLogger(__name__)

Listing = Callable[[str, str], Sequence[Mapping[str, Any]]]
"""(plural, namespace) -> objects; namespace ``ALL_NAMESPACES``: of every namespace."""
GRAPH_KINDS = ("pipelines", "kafkasources", "sparkjobs")


def _stored(listing: Listing) -> tuple[dict[ResourceRef, Resource], dict[ResourceRef, str]]:
    """Every stored object of the graph's kinds, and when each was created."""
    found: dict[ResourceRef, Resource] = {}
    created: dict[ResourceRef, str] = {}
    for plural in GRAPH_KINDS:
        for document in listing(plural, ALL_NAMESPACES):
            try:
                resource = parse_resource(document)
            except InvalidResourceError:
                continue  # an object the schema let through once is its own problem
            ref = ResourceRef.of(resource)
            found[ref] = resource
            created[ref] = str(document.get("metadata", {}).get("creationTimestamp") or "")
    return found, created


def admission_problems(resource: Resource, listing: Listing) -> list[str]:
    """What the incoming object would break. For a Pipeline, its workloads' problems
    count too: a new bootstrap or prefix moves all their topics and ids."""
    me = ResourceRef.of(resource)
    stored, _ = _stored(listing)
    stored.pop(me, None)  # the stored version this one replaces
    problems = []
    for collision in find_collisions([*stored.values(), resource]):
        if collision.resource == me:
            problems.append(str(collision.problem))
        elif isinstance(resource, Pipeline) and _of_pipeline(stored[collision.resource], resource):
            problems += map(str, labelled(collision.resource.label, [collision.problem]))
    return problems


def _of_pipeline(workload: Resource, pipeline: Pipeline) -> bool:
    return (
        not isinstance(workload, Pipeline)
        and workload.metadata.namespace == pipeline.metadata.namespace
        and workload.spec.pipeline == pipeline.metadata.name
    )


def standing_problems(ref: ResourceRef, listing: Listing) -> list[Problem]:
    """The stored object's part in the graph's collisions, for its status: those it
    caused (every other side was stored before it, or there is none, as in a job
    reading its own output). Each is logged naming every side, which the tenant's
    message does not."""
    stored, created = _stored(listing)
    if ref not in stored:
        return []
    mine = [c for c in find_collisions(stored.values()) if c.resource == ref]
    held = [c for c in mine if _caused_by(ref, c.others, created)]
    for collision in held:
        logger.warning("%s", collision.log_message)
    return [c.problem for c in held]


def _caused_by(
    ref: ResourceRef, others: Iterable[ResourceRef], created: Mapping[ResourceRef, str]
) -> bool:
    """Whether ``ref`` came last among the sides (RFC 3339 times compare as strings;
    a tie goes by name, so exactly one side of two is held to it)."""
    mine = (created[ref], ref)
    return all((created.get(other, ""), other) < mine for other in others)


def require_own_topics(kube: KubeClient, obj: Obj) -> None:
    """Stops the pass (Degraded, nothing started) while the object breaks the graph.
    Judged when its spec is new to the operator (not yet observed) or while it is held
    for the graph: listing every object on every pass would cost the operator
    O(objects) per pass, and an unchanged object that was fine can only be broken by
    a newer one, which is the one held."""
    status = obj.get("status") or {}
    held = any(
        (c.get("type"), c.get("status")) == ("Degraded", "True")
        and c.get("reason") in GRAPH_REASONS
        for c in status.get("conditions") or []
    )
    if not held and status.get("observedGeneration") == obj["metadata"].get("generation"):
        return
    metadata = obj["metadata"]
    ref = ResourceRef(obj["kind"], metadata["namespace"], metadata["name"])
    problems = standing_problems(ref, kube.list_objects)
    if problems:
        raise invalid_workload(problems)
