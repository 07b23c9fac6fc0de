"""Every Kafka topic a workload touches, in which role, and the stem of its
producers' transactional ids: the names the tasks and drivers build (``model.names``,
``model.spark_names``), gathered in one place so that ownership is judged on the
very names that will be used.

A source writes its records' topic and its offsets topic, and reads the Kafka topics
its connector declares (``SourceConnector.kafka_reads``: the mirror's, on the cluster
its config names); a SparkJob reads its input topics (named, or its sources' topics)
and writes its Kafka sink's topic and, with the exactly-once sink, a marker topic.
Nothing else of Onceflow's writes to Kafka (the Postgres and files sinks keep their
markers outside Kafka).

Connectors are plugins, found by the caller (``ConnectorLookup``): this module asks
them what they read and imports none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from onceflow.api.connector import ConnectorLookup, KafkaRead, SourceConnector
from onceflow.api.manifests import ResourceRef
from onceflow.api.pipeline import Pipeline
from onceflow.api.source import KafkaSource
from onceflow.api.spark import KafkaDelivery, SparkJob
from onceflow.logic.kafka_clusters import Clusters
from onceflow.logic.resource_set import ResourceSet
from onceflow.model.checkpoint_places import place_of
from onceflow.model.names import SOURCE_TASK, offsets_topic, producer_id_stem
from onceflow.model.spark_names import sink_marker_topic, sink_transactional_id_stem


class Role(StrEnum):
    """What a workload does with a topic; the value names it in messages."""

    OUTPUT = "output topic"
    """A KafkaSource's records (spec.topic)."""
    OFFSETS = "offsets topic"
    """A KafkaSource's source offsets."""
    SINK = "sink topic"
    """A SparkJob's results (spec.sink.kafka.topic)."""
    MARKERS = "sink marker topic"
    """The exactly-once Kafka sink's batch markers."""
    INPUT = "input topic"
    """Read by a SparkJob, or by a KafkaSource's connector (the mirror)."""

    @property
    def writes(self) -> bool:
        return self is not Role.INPUT

    @property
    def with_article(self) -> str:
        return f"{'an' if self.value[0] in 'aeiou' else 'a'} {self.value}"


@dataclass(frozen=True)
class TopicUse:
    """One workload's use of one topic of one cluster."""

    cluster: str
    topic: str
    role: Role
    resource: ResourceRef
    field: str
    """The field that makes the use (to fix), e.g. ``spec.input.sources[1]``."""
    named_after: str | None = None
    """How Onceflow built the name, when the user did not write it."""


@dataclass(frozen=True)
class IdUse:
    """The transactional ids of one workload's producers: ``stem`` and a number."""

    cluster: str
    stem: str
    resource: ResourceRef
    pipeline: str


ConnectorReads = Mapping[ResourceRef, Sequence[KafkaRead]]
"""The Kafka topics each KafkaSource's connector reads."""


def connector_reads(
    found: ResourceSet, connectors: ConnectorLookup
) -> dict[ResourceRef, list[KafkaRead]]:
    """What the connector of each KafkaSource with a Pipeline reads from Kafka. A
    connector that is not installed reads nothing here (its resolver reports it), and
    each type is looked up once (the operator's lookup scans entry points)."""
    loaded: dict[str, SourceConnector | None] = {}
    reads: dict[ResourceRef, list[KafkaRead]] = {}
    for source in found.sources.values():
        kind = source.spec.connector.type
        if kind not in loaded:
            try:
                loaded[kind] = connectors(kind)
            except LookupError:
                loaded[kind] = None
        connector = loaded[kind]
        if connector is not None and found.pipeline_of(source) is not None:
            reads[ResourceRef.of(source)] = connector.kafka_reads(source.spec.connector.config)
    return reads


def inventory(
    found: ResourceSet, clusters: Clusters, reads: ConnectorReads
) -> tuple[list[TopicUse], list[IdUse]]:
    """Every topic each workload touches and the ids of its producers. ``clusters``
    knows every Pipeline's cluster and every bootstrap list of ``reads``."""
    topics: list[TopicUse] = []
    ids: list[IdUse] = []
    workloads: list[KafkaSource | SparkJob] = [*found.sources.values(), *found.spark_jobs.values()]
    for workload in workloads:
        pipeline = found.pipeline_of(workload)
        if pipeline is None:
            continue
        cluster = clusters.of_pipeline(pipeline)
        if isinstance(workload, KafkaSource):
            topics += _source_topics(workload, pipeline, cluster)
            topics += _connector_topics(workload, reads, clusters)
        else:
            topics += _job_topics(workload, pipeline, cluster, found.source_topics(workload))
        ids += _producer_ids(workload, pipeline, cluster)
    return topics, ids


def footprint(
    workload: KafkaSource | SparkJob,
    pipeline: Pipeline,
    source_topics: Mapping[str, str],
    reads: Sequence[KafkaRead],
) -> dict[str, object]:
    """What the topic graph is judged on of one workload, with the very helpers that
    build its part of ``inventory``: every topic it touches and its role there, its
    producers' id stem, its Pipeline (name, cluster, prefix) and a job's checkpoint.
    ``source_topics``: a job's input sources' topics; ``reads``: what a source's
    connector reads. Clusters are the bootstrap lists as written (one judgement joins
    lists that share an address; a footprint only needs to change when they do)."""
    cluster = pipeline.spec.kafka.bootstrap_servers
    if isinstance(workload, KafkaSource):
        uses = _source_topics(workload, pipeline, cluster)
        reading = [(read.bootstrap_servers, read.topic) for read in reads]
        checkpoint = None
    else:
        uses = _job_topics(workload, pipeline, cluster, source_topics)
        reading = []
        place = place_of(workload)
        checkpoint = [place.store, list(place.parts), place.local]
    return {
        "pipeline": [pipeline.metadata.name, cluster, pipeline.transactional_id_prefix],
        "topics": sorted([u.cluster, u.topic, u.role.value] for u in uses),
        "reads": sorted([servers, topic] for servers, topic in reading),
        "ids": sorted([i.cluster, i.stem] for i in _producer_ids(workload, pipeline, cluster)),
        "checkpoint": checkpoint,
    }


def pipeline_topics(
    pipeline: Pipeline, sources: Sequence[KafkaSource], jobs: Sequence[SparkJob]
) -> tuple[list[str], list[str]]:
    """The topics of the Pipeline's own cluster its workloads write, and those they only
    read (written by others), each sorted; a mirror's upstream lives on another cluster
    and is left out."""
    by_name = {s.metadata.name: s.spec.topic for s in sources}
    uses = [u for s in sources for u in _source_topics(s, pipeline, "")]
    uses += [u for j in jobs for u in _job_topics(j, pipeline, "", by_name)]
    written = {u.topic for u in uses if u.role.writes}
    return sorted(written), sorted({u.topic for u in uses} - written)


def _producer_ids(
    workload: KafkaSource | SparkJob, pipeline: Pipeline, cluster: str
) -> list[IdUse]:
    """The stem of its transactional producers' ids, from the one scheme of
    ``model.names`` (a job without the exactly-once Kafka sink has none)."""
    prefix, name = pipeline.transactional_id_prefix, workload.metadata.name
    if isinstance(workload, KafkaSource):
        stem = producer_id_stem(prefix, SOURCE_TASK, name)
    elif _exactly_once_kafka_sink(workload):
        stem = sink_transactional_id_stem(prefix, name)
    else:
        return []
    return [IdUse(cluster, stem, ResourceRef.of(workload), pipeline.metadata.name)]


def _source_topics(source: KafkaSource, pipeline: Pipeline, cluster: str) -> list[TopicUse]:
    """Its records' topic and its offsets topic (``model.names``, as its tasks name it)."""
    ref = ResourceRef.of(source)
    default = None if source.spec.offsets_topic else "<transactionalIdPrefix>-<source>-offsets"
    offsets = offsets_topic(pipeline, source)
    return [
        TopicUse(cluster, source.spec.topic, Role.OUTPUT, ref, "spec.topic"),
        TopicUse(cluster, offsets, Role.OFFSETS, ref, "spec.offsetsTopic", default),
    ]


def _connector_topics(
    source: KafkaSource, reads: ConnectorReads, clusters: Clusters
) -> list[TopicUse]:
    """What its connector reads, on the cluster the connector's config names (which
    may be its Pipeline's own)."""
    ref = ResourceRef.of(source)
    return [
        TopicUse(
            clusters.of_servers(read.bootstrap_servers),
            read.topic,
            Role.INPUT,
            ref,
            f"spec.connector.config.{read.field}",
        )
        for read in reads.get(ref, ())
    ]


def _job_topics(
    job: SparkJob, pipeline: Pipeline, cluster: str, source_topics: Mapping[str, str]
) -> list[TopicUse]:
    """What it reads, its sink topic, and the exactly-once sink's marker topic
    (``model.spark_names``, as the driver names it)."""
    ref, spec = ResourceRef.of(job), job.spec
    uses = [
        TopicUse(cluster, topic, Role.INPUT, ref, f"spec.input.topics[{i}]")
        for i, topic in enumerate(spec.input.topics or [])
    ] + [
        TopicUse(cluster, source_topics[name], Role.INPUT, ref, f"spec.input.sources[{i}]")
        for i, name in enumerate(spec.input.sources or [])
        if name in source_topics
    ]
    if spec.sink.kafka is not None:
        uses.append(
            TopicUse(cluster, spec.sink.kafka.topic, Role.SINK, ref, "spec.sink.kafka.topic")
        )
    if _exactly_once_kafka_sink(job):
        markers = sink_marker_topic(pipeline.transactional_id_prefix, ref.name)
        named = "<transactionalIdPrefix>-<job>-sink-markers"
        uses.append(TopicUse(cluster, markers, Role.MARKERS, ref, "spec.sink.kafka", named))
    return uses


def _exactly_once_kafka_sink(job: SparkJob) -> bool:
    """Onceflow's transactional sink, with markers and producer ids (from ``enabled``
    on; counted before, as the rollout will get there)."""
    kafka = job.spec.sink.kafka
    return kafka is not None and kafka.delivery is KafkaDelivery.EXACTLY_ONCE
