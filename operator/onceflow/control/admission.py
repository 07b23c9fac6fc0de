"""Admission checks: the same preflight rules and messages the reconcilers put in
status, answered before the object is stored (DESIGN 2, "Preflight validation")."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from onceflow.api import InvalidResourceError, KafkaSource, Pipeline, parse_resource
from onceflow.api.driver import SparkJobSettings
from onceflow.api.errors import Problem
from onceflow.api.handled_requests import handled
from onceflow.api.input_reset import InputReset
from onceflow.api.manifests import Resource
from onceflow.api.pipeline import ExactlyOnceMode, WorkloadState, effective_state
from onceflow.api.source import OffsetsChange
from onceflow.api.spark import SparkJob
from onceflow.connectors.registry import operator_loader
from onceflow.control.graph import Listing, admission_problems
from onceflow.control.workloads import current_mode
from onceflow.logic.preflight import at_least_once_sink_problem
from onceflow.logic.resolve import resolve_source, resolve_spark_job
from onceflow.logic.tenant_policy import DEFAULT_POLICY, TenantPolicy
from onceflow.model.tasks import DesiredTasks

Lookup = Callable[[str, str, str], Mapping[str, Any] | None]
"""(plural, namespace, name) -> object or None."""


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


def review(
    document: Mapping[str, Any],
    lookup: Lookup,
    listing: Listing,
    policy: TenantPolicy = DEFAULT_POLICY,
    old: Mapping[str, Any] | None = None,
) -> Verdict:
    """Allows or rejects one incoming object; never raises for bad input. ``policy``:
    what the platform allows tenants (connector modules, sparkConf keys, images);
    ``old``: the stored object an update replaces."""
    try:
        resource = parse_resource(document)
    except InvalidResourceError as error:
        return Verdict([str(p) for p in error.problems])
    requested = _request_verdict(resource, old, lookup)
    if not requested.allowed:
        return requested
    alone = _review_alone(resource, lookup, listing, policy)
    verdict = Verdict(alone.problems, [*requested.warnings, *alone.warnings])
    if not verdict.allowed:
        return verdict
    graph = admission_problems(resource, listing, operator_loader(policy.connector_modules))
    return Verdict(graph, verdict.warnings) if graph else verdict


def _review_alone(
    resource: Resource, lookup: Lookup, listing: Listing, policy: TenantPolicy
) -> Verdict:
    """The object against the policy and what it refers to."""
    namespace = resource.metadata.namespace
    if refused := policy.resource_problems(resource):
        return _verdict(refused)
    if isinstance(resource, KafkaSource):
        pipeline = _pipeline(lookup, namespace, resource.spec.pipeline)
        connectors = operator_loader(policy.connector_modules)
        return _verdict(resolve_source(resource, pipeline, connectors, where=_where(namespace)))
    if isinstance(resource, SparkJob):
        return _review_spark_job(resource, namespace, lookup)
    return review_pipeline_change(resource, listing("sparkjobs", namespace))


def _request_verdict(resource: Resource, old: Mapping[str, Any] | None, lookup: Lookup) -> Verdict:
    """A new offsets change or input reset asked of a stored workload that is not being
    stopped: the operator would refuse it for good (it is never kept for some later,
    unrelated stop), so it is refused before it is stored and ``kubectl apply`` or an
    Argo CD sync says so at once. A request already handled (the same id as stored, or
    one the status remembers: a manifest brought back from Git) changes nothing and
    passes. A workload created with one (re-created from a manifest that still carries
    a handled request, in a new cluster) is only warned about: what its status will say
    is harmless there, and refusing it would keep the manifest from being applied at
    all. Without its Pipeline the state is not known, and the request passes too."""
    request: OffsetsChange | InputReset | None = None
    if isinstance(resource, KafkaSource):
        request, wire = resource.spec.offsets_change, "offsetsChange"
    elif isinstance(resource, SparkJob):
        request, wire = resource.spec.input_reset, "inputReset"
    if request is None or isinstance(resource, Pipeline):
        return Verdict()
    stored = old or {}
    asked_before = (stored.get("spec") or {}).get(wire) or {}
    recorded = (stored.get("status") or {}).get(wire) or {}
    if asked_before.get("id") == request.id or handled(
        request.id, recorded.get("id"), recorded.get("earlier") or ()
    ):
        return Verdict()
    pipeline = _pipeline(lookup, resource.metadata.namespace, resource.spec.pipeline)
    if pipeline is None:
        return Verdict()
    state = effective_state(resource.spec.state, pipeline.spec.state)
    if state is WorkloadState.STOPPED:
        return Verdict()
    what = "an offsets change" if wire == "offsetsChange" else "an input reset"
    said = (
        f"spec.{wire}: {what} ({request.id!r}) applies only to a stopped {resource.kind}, "
        f"and this one would be in state {state}"
    )
    if old is None:
        return Verdict(warnings=[f"{said}: it is recorded Refused and never applied"])
    return Verdict(
        [
            f"{said}: set spec.state: stopped in the same apply (it is applied once the "
            "stop is fenced), then running again after it"
        ]
    )


def _where(namespace: str) -> str:
    return f"in namespace {namespace!r} yet"


def _verdict(resolved: DesiredTasks | SparkJobSettings | list[Problem]) -> Verdict:
    """Refuses what is wrong with the object; only warns about objects it refers to
    that do not exist yet (the status reports them until they do)."""
    if not isinstance(resolved, list):
        return Verdict()
    return Verdict(
        [str(p) for p in resolved if not p.missing_object],
        [str(p) for p in resolved if p.missing_object],
    )


def _pipeline(lookup: Lookup, namespace: str, name: str) -> Pipeline | None:
    """The stored Pipeline; one the current schema rejects (stored by an older
    version) is the Pipeline's problem, reported in its status, and judged as absent
    here rather than failing every review of its workloads."""
    stored = lookup("pipelines", namespace, name)
    try:
        return Pipeline.model_validate(stored) if stored is not None else None
    except ValueError:
        return None


def _review_spark_job(job: SparkJob, namespace: str, lookup: Lookup) -> Verdict:
    pipeline = _pipeline(lookup, namespace, job.spec.pipeline)
    topics = {}
    for name in job.spec.input.sources or []:
        source = lookup("kafkasources", namespace, name)
        if source is not None:
            topics[name] = source["spec"]["topic"]
    return _verdict(
        resolve_spark_job(
            job, pipeline, topics, where=_where(namespace), mode=current_mode(pipeline)
        )
    )


def review_pipeline_change(pipeline: Pipeline, spark_jobs: Sequence[Mapping[str, Any]]) -> Verdict:
    """Turning exactly-once on must not strand a job with an at-least-once sink."""
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
