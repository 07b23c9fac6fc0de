"""Which side of a standing collision in the topic graph the operator holds back.

The webhook refuses a collision before anything is stored; what gets past it (stored
while no webhook ran, or while another object was being stored at the same moment)
is judged by the reconcilers, and there one side must keep running: the one that
already owns the topics and ids. A workload owns them once a reconciler has judged
its current claim (its part in the graph: topics, ids, Pipeline, inputs, checkpoint)
free of collisions and recorded that claim in status; an edit that changes that part
makes a new claim, judged again. Between two sides in the same state the older one
keeps them, and a tie goes by name, so that exactly one side of any collision runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from onceflow.api.connector import KafkaRead
from onceflow.api.manifests import ResourceRef
from onceflow.api.pipeline import Pipeline
from onceflow.api.source import KafkaSource
from onceflow.api.spark import SparkJob
from onceflow.logic.topic_inventory import footprint
from onceflow.logic.topic_ownership import Collision
from onceflow.model.spark_app import digest


def claim_of(
    workload: KafkaSource | SparkJob,
    pipeline: Pipeline,
    source_topics: Mapping[str, str],
    reads: Sequence[KafkaRead],
) -> str:
    """A digest of the workload's part in the topic graph (``topic_inventory.footprint``:
    its topics and roles, ids, Pipeline, inputs and checkpoint), not of its whole
    spec: an edit that cannot move any of them (a poll interval, resources, an image)
    makes no new claim, so it is not judged against every stored object again. Judged
    per edit, a burst of 50 such edits at 2,000 sources waited 19 s at p99 for reads
    of the whole graph (``benchmarks/operator_scale.py``)."""
    return digest(footprint(workload, pipeline, source_topics, reads))


def legacy_claim_of(
    workload: KafkaSource | SparkJob, pipeline: Pipeline, source_topics: Mapping[str, str]
) -> str:
    """The claim as releases before 2026-11-29 recorded it, a digest of the whole
    spec. A workload whose recorded claim is this one still owns its topics: nothing
    its part in the graph is built from has changed since it was judged. Read as not
    owning, an upgrade would have handed an owner's topic to an older workload held
    for taking it, while the owner's tasks ran on."""
    return digest(
        {
            "spec": workload.spec.model_dump(mode="json", by_alias=True, exclude_none=True),
            "bootstrap": pipeline.spec.kafka.bootstrap_servers,
            "prefix": pipeline.transactional_id_prefix,
            "sources": dict(source_topics),
        }
    )


def claim_recorded(
    recorded: str | None,
    workload: KafkaSource | SparkJob,
    pipeline: Pipeline,
    source_topics: Mapping[str, str],
    reads: Sequence[KafkaRead],
) -> bool:
    """Whether ``recorded`` (status.topicClaim) is the workload's current claim, in
    this release's form or the one before (``legacy_claim_of``)."""
    return recorded is not None and recorded in (
        claim_of(workload, pipeline, source_topics, reads),
        legacy_claim_of(workload, pipeline, source_topics),
    )


def is_held(
    collision: Collision, owns: Callable[[ResourceRef], bool], created: Mapping[ResourceRef, str]
) -> bool:
    """Whether the collision stops its resource: it has no other side (a job reading
    its own output), or another side ranks before it (owner first, then the older,
    then the name). ``created``: RFC 3339 creation times, which compare as strings."""

    def rank(ref: ResourceRef) -> tuple[bool, str, ResourceRef]:
        return (not owns(ref), created.get(ref, ""), ref)

    mine = rank(collision.resource)
    return not collision.others or any(rank(other) < mine for other in collision.others)
