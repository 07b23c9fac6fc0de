"""The topic and transactional-id graph judged against what the API server holds
(``logic.topic_ownership``), for the admission webhook and the reconcilers.

Kafka clusters know nothing of namespaces, so every stored Pipeline, KafkaSource and
SparkJob the operator watches takes part (two operators on one Kafka cluster do not
see each other's). The webhook refuses an object that would break the graph; a
reconciler holds back (Degraded, nothing started) a workload that breaks it all the
same, stored while no webhook ran or at the same moment as the other side. In a
standing collision the side that owns the topics keeps them (``logic.topic_claims``):
a newcomer cannot stop another tenant's running workload by copying its topic.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from onceflow.api import InvalidResourceError, KafkaSource, Pipeline, parse_resource
from onceflow.api.connector import ConnectorLookup, KafkaRead
from onceflow.api.errors import Problem, labelled
from onceflow.api.manifests import Resource, ResourceRef
from onceflow.api.spark import SparkJob
from onceflow.control.kube import ALL_NAMESPACES, KubeClient, Obj
from onceflow.control.shared_reads import SharedReads
from onceflow.control.workloads import invalid_workload
from onceflow.logic.resource_set import ResourceSet
from onceflow.logic.topic_claims import claim_of, claim_recorded, is_held, legacy_claim_of
from onceflow.logic.topic_inventory import connector_reads
from onceflow.logic.topic_ownership import Collision, find_collisions

logger = logging.getLogger(__name__)

Listing = Callable[[str, str], Sequence[Mapping[str, Any]]]
"""(plural, namespace) -> objects; namespace ``ALL_NAMESPACES``: of every namespace."""
GRAPH_KINDS = ("pipelines", "kafkasources", "sparkjobs")
CLAIM_FIELD = "topicClaim"
"""Where status records the claim a workload was cleared with (``FencingStatus``)."""


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


def admission_problems(
    resource: Resource, listing: Listing, connectors: ConnectorLookup
) -> list[str]:
    """What the incoming object would break. For a Pipeline, its workloads' problems
    count too: a new bootstrap or prefix moves all their topics and ids. An update is
    refused only for problems it brings: an owner whose topic an intruder took past
    the webhook can still scale or edit itself (the reconcilers hold the intruder).
    ``connectors``: the operator's connector loader, asked what each source reads."""
    me = ResourceRef.of(resource)
    stored, _ = _stored(listing)
    previous = stored.pop(me, None)  # the stored version this one replaces
    already = set(_problems_of(previous, stored, connectors)) if previous is not None else set()
    return [p for p in _problems_of(resource, stored, connectors) if p not in already]


def _problems_of(
    resource: Resource, stored: Mapping[ResourceRef, Resource], connectors: ConnectorLookup
) -> list[str]:
    me = ResourceRef.of(resource)
    problems = []
    both = [*stored.values(), resource]
    for collision in find_collisions(both, connectors=connectors, pod_local_paths=True):
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


@dataclass(frozen=True)
class StoredGraph:
    """Every stored object of the graph's kinds, when each was created, and the
    graph's collisions: read and judged once for all the passes that share it."""

    stored: Mapping[ResourceRef, Resource]
    created: Mapping[ResourceRef, str]
    collisions: Sequence[Collision]
    connectors: ConnectorLookup
    """Asked what a source of a collision reads (part of its claim)."""


def _read_graph(listing: Listing, connectors: ConnectorLookup) -> StoredGraph:
    stored, created = _stored(listing)
    collisions = find_collisions(stored.values(), connectors=connectors, pod_local_paths=True)
    return StoredGraph(stored, created, tuple(collisions), connectors)


class GraphReads:
    """The stored graph for the reconcilers, read and judged once for the passes that
    ask at about the same moment (``shared_reads``: every pass gets a read that began
    after it asked, so an object stored before is seen, as with a read of its own).
    Read per pass, a burst of 50 spec changes cost 50 listings of every watched
    namespace and 50 judgements of the whole graph, and their apply -> pods p99 went
    from 6.5 s to 26 s at 500 sources (``benchmarks/operator_scale.py``)."""

    def __init__(self, listing: Listing, connectors: ConnectorLookup) -> None:
        self._reads: SharedReads[None, StoredGraph] = SharedReads(
            lambda _: _read_graph(listing, connectors)
        )

    def __call__(self) -> StoredGraph:
        return self._reads(None)


def standing_problems(ref: ResourceRef, graph: StoredGraph) -> list[Problem]:
    """The stored object's part in the graph's collisions, where it is the side held
    back (``logic.topic_claims``). Each is logged naming every side, which the
    tenant's message does not."""
    stored = graph.stored
    if ref not in stored:
        return []
    mine = [c for c in graph.collisions if c.resource == ref]
    if not mine:
        return []
    found = ResourceSet.of(stored.values())

    def owns(other: ResourceRef) -> bool:
        workload = stored[other]
        pipeline = None if isinstance(workload, Pipeline) else found.pipeline_of(workload)
        if isinstance(workload, Pipeline) or pipeline is None:
            return False
        inputs = found.source_topics(workload) if isinstance(workload, SparkJob) else {}
        reads = connector_reads(ResourceSet.of([pipeline, workload]), graph.connectors)
        recorded = workload.status.topic_claim if workload.status is not None else None
        return claim_recorded(recorded, workload, pipeline, inputs, reads.get(other, ()))

    held = [c for c in mine if is_held(c, owns, graph.created)]
    for collision in held:
        logger.warning("%s", collision.log_message)
    return [c.problem for c in held]


def claim_topics(
    kube: KubeClient,
    plural: str,
    obj: Obj,
    workload: KafkaSource | SparkJob,
    pipeline: Pipeline,
    source_topics: Mapping[str, str],
    reads: Sequence[KafkaRead],
    graph: Callable[[], StoredGraph],
) -> Obj:
    """Records the workload's claim on its topics and ids once the graph allows it,
    and returns the object as written; stops the pass (Degraded, nothing started)
    while it is the side held back. Listing every object costs O(objects), so it is
    done only for a claim not yet recorded: a new workload, an edit of its part in the
    graph, a moved Pipeline, a workload held before. ``reads``: what a source's
    connector reads (nothing for a job)."""
    claim = claim_of(workload, pipeline, source_topics, reads)
    status = obj.get("status") or {}
    recorded = status.get(CLAIM_FIELD)
    if recorded == claim:
        return obj
    if recorded != legacy_claim_of(workload, pipeline, source_topics):
        problems = standing_problems(ResourceRef.of(workload), graph())
        if problems:
            raise invalid_workload(problems)
    # Judged free, or recorded in the earlier release's form (then nothing changed
    # since it was judged): recorded in this release's form.
    return kube.replace_status(plural, obj, {**status, CLAIM_FIELD: claim})
