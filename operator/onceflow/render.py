"""``onceflow render``: the objects the operator would create for some manifests,
without a cluster, through the operator's own model code (a preview for review and
GitOps diffs)."""

from __future__ import annotations

from collections.abc import Sequence
from importlib.metadata import version
from typing import Any

from onceflow.api import InvalidResourceError, KafkaSource, Pipeline, Resource
from onceflow.api.connector import ConnectorLookup
from onceflow.api.errors import Problem, labelled
from onceflow.api.manifests import MANIFESTS, ResourceRef
from onceflow.api.spark import SparkJob
from onceflow.api.task import KubernetesAuthority
from onceflow.connectors.registry import operator_loader
from onceflow.logic.resolve import IN_MANIFESTS, resolve_source, resolve_spark_job
from onceflow.logic.resource_set import ResourceSet
from onceflow.logic.tenant_policy import DEFAULT_POLICY, TenantPolicy
from onceflow.logic.topic_ownership import manifest_problems
from onceflow.model.objects import (
    KAFKA_SECRET_MOUNT,
    METRICS_PORT,
    WorkloadImage,
    generation_configmap,
    task_pod,
    task_rbac,
)
from onceflow.model.spark_app import job_configmap
from onceflow.model.submission import submission_of

DEFAULT_IMAGE = WorkloadImage()


def render_source(
    source: KafkaSource,
    pipeline: Pipeline | None,
    generation: int,
    image: WorkloadImage,
    connectors: ConnectorLookup,
) -> list[dict[str, Any]]:
    secret = pipeline.spec.kafka.auth_secret_ref if pipeline else None
    desired = resolve_source(
        source,
        pipeline,
        connectors,
        where=IN_MANIFESTS,
        kafka_config_dir=KAFKA_SECRET_MOUNT if secret else None,
    )
    if isinstance(desired, list):
        raise InvalidResourceError(ResourceRef.of(source).label, desired)
    authority = KubernetesAuthority(namespace=source.metadata.namespace, name=source.metadata.name)
    settings = desired.settings(generation, authority, metrics_port=METRICS_PORT)
    pods = [task_pod(source, s, image, secret.name if secret else None) for s in settings]
    return [generation_configmap(source, settings), *pods]


def render_spark_job(
    job: SparkJob, found: ResourceSet, image: WorkloadImage
) -> list[dict[str, Any]]:
    settings = resolve_spark_job(
        job, found.pipeline_of(job), found.source_topics(job), where=IN_MANIFESTS
    )
    if isinstance(settings, list):
        raise InvalidResourceError(ResourceRef.of(job).label, settings)
    return [
        job_configmap(job, settings),
        submission_of(job).render(job, settings, image, version("pyspark")),
    ]


def render_resources(
    resources: Sequence[Resource],
    generation: int = 1,
    image: WorkloadImage = DEFAULT_IMAGE,
    policy: TenantPolicy = DEFAULT_POLICY,
) -> list[dict[str, Any]]:
    """Objects for every KafkaSource and SparkJob, in the pipeline's target mode; or
    one error with every problem of every resource, as ``onceflow run`` reports them.
    ``policy``: what the platform allows tenants, as the operator is told it; what it
    refuses, the preview refuses too (a reviewer never approves objects the operator
    would not create)."""
    found = ResourceSet.of(resources)
    connectors = operator_loader(policy.connector_modules)
    objects: list[dict[str, Any]] = []
    for namespace in sorted({namespace for namespace, _ in found.sources}):
        objects += task_rbac(namespace)
    problems: list[Problem] = [
        *(
            p
            for r in resources
            for p in labelled(ResourceRef.of(r).label, policy.resource_problems(r))
        )
    ]
    for source in found.sources.values():
        try:
            objects += render_source(
                source, found.pipeline_of(source), generation, image, connectors
            )
        except InvalidResourceError as error:
            problems += labelled(error.resource, error.problems)
    for job in found.spark_jobs.values():
        try:
            objects += render_spark_job(job, found, image)
        except InvalidResourceError as error:
            problems += labelled(error.resource, error.problems)
    problems += manifest_problems(resources, connectors=connectors, pod_local_paths=True)
    if problems:
        raise InvalidResourceError(MANIFESTS, problems)
    return objects
