"""``onceflow render``: the objects the operator would create for some manifests,
without a cluster, through the operator's own model code (a preview for review and
GitOps diffs)."""

from __future__ import annotations

from collections.abc import Sequence
from importlib.metadata import version
from typing import Any

from onceflow.api import InvalidResourceError, KafkaSource, Pipeline, Resource
from onceflow.api.spark import SparkJob
from onceflow.api.task import KubernetesAuthority
from onceflow.logic.resolve import IN_MANIFESTS, resolve_source, resolve_spark_job
from onceflow.model.objects import (
    DEFAULT_TASK_IMAGE,
    KAFKA_SECRET_MOUNT,
    METRICS_PORT,
    generation_configmap,
    task_pod,
    task_rbac,
)
from onceflow.model.spark_app import job_configmap
from onceflow.model.submission import submission_of
from onceflow.runtime.plugins import load_connector


def render_source(
    source: KafkaSource, pipeline: Pipeline | None, generation: int, image: str
) -> list[dict[str, Any]]:
    secret = pipeline.spec.kafka.auth_secret_ref if pipeline else None
    desired = resolve_source(
        source,
        pipeline,
        load_connector,
        where=IN_MANIFESTS,
        kafka_config_dir=KAFKA_SECRET_MOUNT if secret else None,
    )
    if isinstance(desired, list):
        raise InvalidResourceError(f"KafkaSource {source.metadata.name!r}", desired)
    authority = KubernetesAuthority(namespace=source.metadata.namespace, name=source.metadata.name)
    settings = desired.settings(generation, authority, metrics_port=METRICS_PORT)
    pods = [task_pod(source, s, image, secret.name if secret else None) for s in settings]
    return [generation_configmap(source, settings), *pods]


def render_resources(
    resources: Sequence[Resource], generation: int = 1, image: str = DEFAULT_TASK_IMAGE
) -> list[dict[str, Any]]:
    """Objects for every KafkaSource and SparkJob, in the pipeline's target mode."""
    pipelines = {
        (r.metadata.namespace, r.metadata.name): r for r in resources if isinstance(r, Pipeline)
    }
    sources = [r for r in resources if isinstance(r, KafkaSource)]
    objects: list[dict[str, Any]] = []
    for namespace in sorted({s.metadata.namespace for s in sources}):
        objects += task_rbac(namespace)
    for source in sources:
        pipeline = pipelines.get((source.metadata.namespace, source.spec.pipeline))
        objects += render_source(source, pipeline, generation, image)
    topics = {s.metadata.name: s.spec.topic for s in sources}
    for job in (r for r in resources if isinstance(r, SparkJob)):
        pipeline = pipelines.get((job.metadata.namespace, job.spec.pipeline))
        settings = resolve_spark_job(job, pipeline, topics, where=IN_MANIFESTS)
        if isinstance(settings, list):
            raise InvalidResourceError(f"SparkJob {job.metadata.name!r}", settings)
        objects += [
            job_configmap(job, settings),
            submission_of(job).render(job, settings, image, version("pyspark")),
        ]
    return objects
