"""Admission checks: the same preflight rules and messages the reconcilers put in
status, answered before the object is stored (DESIGN 2, "Preflight validation")."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from onceflow.api import InvalidResourceError, KafkaSource, Pipeline, parse_resource
from onceflow.api.pipeline import ExactlyOnceMode
from onceflow.api.spark import SparkJob
from onceflow.logic.preflight import at_least_once_sink_problem, preflight_source
from onceflow.runtime.plugins import UnknownConnectorError, load_connector

Lookup = Callable[[str, str, str], Mapping[str, Any] | None]
"""(plural, namespace, name) -> object or None."""
Listing = Callable[[str, str], Sequence[Mapping[str, Any]]]
"""(plural, namespace) -> objects."""


@dataclass(frozen=True)
class Verdict:
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def allowed(self) -> bool:
        return not self.problems

    @property
    def message(self) -> str:
        return "; ".join(self.problems)


def review(document: Mapping[str, Any], lookup: Lookup, listing: Listing) -> Verdict:
    """Allows or rejects one incoming object; never raises for bad input."""
    try:
        resource = parse_resource(document)
    except InvalidResourceError as error:
        return Verdict(
            [f"{path}: {message}" if path else message for path, message in error.problems]
        )
    namespace = resource.metadata.namespace
    if isinstance(resource, KafkaSource):
        return _review_source(resource, namespace, lookup)
    if isinstance(resource, SparkJob):
        return _review_spark_job(resource, namespace, lookup)
    return review_pipeline_change(
        resource, listing("sparkjobs", namespace), listing("pipelines", namespace)
    )


def _missing_pipeline(name: str, namespace: str, lookup: Lookup) -> list[str]:
    # A warning, not a rejection: GitOps tools apply a directory in any order, and the
    # Pipeline may arrive a moment later (the status reports it until then).
    if lookup("pipelines", namespace, name) is None:
        return [f"spec.pipeline: no Pipeline {name!r} in namespace {namespace!r} yet"]
    return []


def _review_source(source: KafkaSource, namespace: str, lookup: Lookup) -> Verdict:
    try:
        connector = load_connector(source.spec.connector.type)
    except UnknownConnectorError as error:
        return Verdict([str(error)])
    problems = [f"{p}: {m}" for p, m in preflight_source(source.spec, connector)]
    return Verdict(problems, _missing_pipeline(source.spec.pipeline, namespace, lookup))


def _review_spark_job(job: SparkJob, namespace: str, lookup: Lookup) -> Verdict:
    warnings = _missing_pipeline(job.spec.pipeline, namespace, lookup)
    pipeline = lookup("pipelines", namespace, job.spec.pipeline)
    mode = ExactlyOnceMode((pipeline or {}).get("spec", {}).get("exactlyOnce", "disabled"))
    refused = at_least_once_sink_problem(job.spec, job.spec.pipeline, mode)
    return Verdict([f"{refused[0]}: {refused[1]}"] if refused else [], warnings)


def _prefix_taken(pipeline: Pipeline, pipelines: Sequence[Mapping[str, Any]]) -> list[str]:
    """Two Pipelines with one transactionalIdPrefix give same-named workloads the same
    ids: their producers would fence each other forever, and share offsets topics."""
    prefix = pipeline.transactional_id_prefix
    for document in pipelines:
        try:
            other = Pipeline.model_validate(document)
        except ValueError:
            continue
        if other.metadata.name != pipeline.metadata.name and (
            other.transactional_id_prefix == prefix
        ):
            return [
                f"spec.transactionalIdPrefix: {prefix!r} is already the prefix of Pipeline "
                f"{other.metadata.name!r}; choose another (ids and offsets topics would "
                "collide)"
            ]
    return []


def review_pipeline_change(
    pipeline: Pipeline,
    spark_jobs: Sequence[Mapping[str, Any]],
    pipelines: Sequence[Mapping[str, Any]] = (),
) -> Verdict:
    """A prefix no other Pipeline uses; turning exactly-once on must not strand a job
    with an at-least-once sink."""
    taken = _prefix_taken(pipeline, pipelines)
    if taken:
        return Verdict(taken)
    if pipeline.spec.exactly_once is ExactlyOnceMode.DISABLED:
        return Verdict()
    blocking = []
    for document in spark_jobs:
        try:
            job = SparkJob.model_validate(document)
        except ValueError:
            continue  # a stored job the schema let through is the job's problem, not this one
        name = pipeline.metadata.name
        if job.spec.pipeline == name and at_least_once_sink_problem(
            job.spec, name, pipeline.spec.exactly_once
        ):
            blocking.append(job.metadata.name)
    if blocking:
        return Verdict(
            [
                f"spec.exactlyOnce: {pipeline.spec.exactly_once} needs exactly-once sinks, but "
                f"SparkJob(s) {', '.join(blocking)} use sink.kafka.delivery: atLeastOnce; "
                "switch them to exactlyOnce first"
            ]
        )
    return Verdict()
