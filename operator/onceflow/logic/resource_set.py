"""Pipelines, KafkaSources and SparkJobs as one set, each found by namespace and name
the way the API server finds it.

A workload's Pipeline and a job's input sources are always looked up in the
workload's own namespace: two tenants that pick the same names never resolve to each
other's objects. Where a set holds one kind and name twice in a namespace (manifests
can; the API server cannot), the last one wins, as the last ``kubectl apply`` would;
``logic.topic_ownership`` reports the duplicate.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from onceflow.api.manifests import Resource
from onceflow.api.pipeline import Pipeline
from onceflow.api.source import KafkaSource
from onceflow.api.spark import SparkJob

Key = tuple[str, str]
"""(namespace, name)"""


def _key(resource: Resource) -> Key:
    return (resource.metadata.namespace, resource.metadata.name)


@dataclass(frozen=True)
class ResourceSet:
    """The objects of one manifest stream, or of every namespace the API server lists."""

    pipelines: Mapping[Key, Pipeline]
    sources: Mapping[Key, KafkaSource]
    spark_jobs: Mapping[Key, SparkJob]

    @classmethod
    def of(cls, resources: Iterable[Resource]) -> ResourceSet:
        pipelines: dict[Key, Pipeline] = {}
        sources: dict[Key, KafkaSource] = {}
        spark_jobs: dict[Key, SparkJob] = {}
        for resource in resources:
            if isinstance(resource, Pipeline):
                pipelines[_key(resource)] = resource
            elif isinstance(resource, KafkaSource):
                sources[_key(resource)] = resource
            else:
                spark_jobs[_key(resource)] = resource
        return cls(pipelines, sources, spark_jobs)

    def pipeline_of(self, workload: KafkaSource | SparkJob) -> Pipeline | None:
        return self.pipelines.get((workload.metadata.namespace, workload.spec.pipeline))

    def source_topics(self, job: SparkJob) -> dict[str, str]:
        """The topics of the KafkaSources ``job`` reads (``spec.input.sources``) that
        exist in its namespace, by source name."""
        namespace = job.metadata.namespace
        found = (self.sources.get((namespace, name)) for name in job.spec.input.sources or [])
        return {s.metadata.name: s.spec.topic for s in found if s is not None}
