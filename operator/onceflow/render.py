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
from onceflow.control.app import DEFAULT_TASK_IMAGE
from onceflow.logic.preflight import preflight_source
from onceflow.model.objects import (
    KAFKA_SECRET_MOUNT,
    METRICS_PORT,
    generation_configmap,
    task_pod,
    task_rbac,
)
from onceflow.model.spark_app import job_configmap, job_settings
from onceflow.model.submission import submission_of
from onceflow.model.tasks import desired_tasks
from onceflow.runtime.plugins import UnknownConnectorError, load_connector


def render_source(
    source: KafkaSource, pipeline: Pipeline, generation: int, image: str
) -> list[dict[str, Any]]:
    try:
        connector = load_connector(source.spec.connector.type)
    except UnknownConnectorError as error:
        raise InvalidResourceError(
            f"KafkaSource {source.metadata.name!r}", [("", str(error))]
        ) from None
    problems = preflight_source(source.spec, connector)
    if problems:
        raise InvalidResourceError(f"KafkaSource {source.metadata.name!r}", problems)
    secret = pipeline.spec.kafka.auth_secret_ref
    desired = desired_tasks(
        pipeline,
        source,
        connector.task_configs(source.spec.connector.config, source.spec.tasks_max),
        kafka_config_dir=KAFKA_SECRET_MOUNT if secret else None,
    )
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
        if pipeline is None:
            raise InvalidResourceError(
                f"KafkaSource {source.metadata.name!r}",
                [("spec.pipeline", f"no Pipeline {source.spec.pipeline!r} in the given files")],
            )
        objects += render_source(source, pipeline, generation, image)
    topics = {s.metadata.name: s.spec.topic for s in sources}
    for job in (r for r in resources if isinstance(r, SparkJob)):
        pipeline = pipelines.get((job.metadata.namespace, job.spec.pipeline))
        if pipeline is None:
            raise InvalidResourceError(
                f"SparkJob {job.metadata.name!r}",
                [("spec.pipeline", f"no Pipeline {job.spec.pipeline!r} in the given files")],
            )
        missing = [n for n in job.spec.input.sources or [] if n not in topics]
        if missing:
            raise InvalidResourceError(
                f"SparkJob {job.metadata.name!r}",
                [("spec.input.sources", f"no KafkaSource {missing[0]!r} in the given files")],
            )
        settings = job_settings(job, pipeline, pipeline.spec.exactly_once, topics)
        objects += [
            job_configmap(job, settings),
            submission_of(job).render(job, settings, image, version("pyspark")),
        ]
    return objects
