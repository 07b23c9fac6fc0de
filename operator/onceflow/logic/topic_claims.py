"""Which side of a standing collision in the topic graph the operator holds back.

The webhook refuses a collision before anything is stored; what gets past it (stored
while no webhook ran, or while another object was being stored at the same moment)
is judged by the reconcilers, and there one side must keep running: the one that
already owns the topics and ids. A workload owns them once a reconciler has judged
its current claim (its spec, its Pipeline's cluster and prefix, its inputs) free of
collisions and recorded that claim in status; an edit makes a new claim, judged
again. Between two sides in the same state the older one keeps them, and a tie goes
by name, so that exactly one side of any collision runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from onceflow.api.manifests import ResourceRef
from onceflow.api.pipeline import Pipeline
from onceflow.api.source import KafkaSource
from onceflow.api.spark import SparkJob
from onceflow.logic.topic_ownership import Collision
from onceflow.model.spark_app import digest


def claim_of(
    workload: KafkaSource | SparkJob, pipeline: Pipeline, source_topics: Mapping[str, str]
) -> str:
    """A digest of everything the workload's topics and ids are built from: its whole
    spec (a field left out would let an edit escape the check), its Pipeline's
    cluster and transactional-id prefix, and the topics of the sources it reads."""
    return digest(
        {
            "spec": workload.spec.model_dump(mode="json", by_alias=True, exclude_none=True),
            "bootstrap": pipeline.spec.kafka.bootstrap_servers,
            "prefix": pipeline.transactional_id_prefix,
            "sources": dict(source_topics),
        }
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
