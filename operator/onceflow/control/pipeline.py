"""Pipeline reconciler: the gated two-phase rollout across every workload (DESIGN 3.3).

It publishes the pipeline's *current* mode in status; sources and Spark jobs converge
on it and report back. Only when every workload runs the current mode and is ready
does the pipeline take the next step toward ``spec.exactlyOnce``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar

from pydantic import ValidationError

from onceflow.api import ExactlyOnceMode, Pipeline
from onceflow.api.pipeline import PipelineStatus, RolloutStatus, WorkloadState, WorkloadStatus
from onceflow.api.source import ExactlyOnceSupport, KafkaSource
from onceflow.api.spark import KafkaDelivery, SparkJob
from onceflow.api.status import ConditionStatus, ConditionType
from onceflow.connectors.registry import ConnectorLoader, operator_loader
from onceflow.control.failures import reporting_failures
from onceflow.control.hanging_watch import Followed, HangingWatch
from onceflow.control.kube import KubeClient, Obj, now_rfc3339
from onceflow.control.operator_metrics import HangingCounts, RolloutSteps
from onceflow.control.status_writer import StatusWriter
from onceflow.control.workloads import invalid_workload, pipeline_client_settings
from onceflow.logic.conditions import set_condition
from onceflow.logic.delivery_guarantee import (
    Guarantee,
    JobStage,
    SourceStage,
    judge_delivery,
)
from onceflow.logic.hanging_transactions import Hanging, longest_transaction_timeout_s
from onceflow.logic.rollout import (
    WorkloadObservation,
    decide_rollout,
    resume_point,
)
from onceflow.logic.tenant_policy import TenantPolicy
from onceflow.logic.topic_inventory import pipeline_topics

PLURAL = "pipelines"


def _condition(obj: Obj, type_: ConditionType) -> dict[str, str]:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == type_.value:
            return dict(condition)
    return {}


ACCEPTED_PREFIX = "acceptedTransactionalIdPrefix"


def _ran_before_prefix_rule(pipeline: Pipeline) -> bool:
    """A status without the accepted-prefix field was written by an operator from
    before the rule (this one writes it with every status, "" for none)."""
    status = pipeline.status
    return (
        status is not None
        and status.observed_generation is not None
        and status.accepted_transactional_id_prefix is None
    )


def _degraded(obj: Obj) -> str:
    """The workload's Degraded reason and message, "" while it is not degraded."""
    condition = _condition(obj, ConditionType.DEGRADED)
    if condition.get("status") != ConditionStatus.TRUE.value:
        return ""
    return f"{condition.get('reason', 'Degraded')}: {condition.get('message', '')}"


def observe_source(obj: Obj) -> WorkloadObservation:
    """A source counts in a mode once that generation is fenced and all tasks run."""
    status = obj.get("status") or {}
    settled = status.get("generation") and status.get("generation") == status.get(
        "fencedGeneration"
    )
    mode = ExactlyOnceMode(status["mode"]) if settled and status.get("mode") else None
    ready = _condition(obj, ConditionType.READY).get("status") == ConditionStatus.TRUE.value
    message = "" if ready else _condition(obj, ConditionType.READY).get("message", "not observed")
    return WorkloadObservation(
        "KafkaSource", obj["metadata"]["name"], mode, ready, message, _degraded(obj)
    )


def observe_spark_job(obj: Obj) -> WorkloadObservation:
    status = obj.get("status") or {}
    mode = ExactlyOnceMode(status["observedMode"]) if status.get("observedMode") else None
    ready = _condition(obj, ConditionType.READY).get("status") == ConditionStatus.TRUE.value
    message = "" if ready else _condition(obj, ConditionType.READY).get("message", "not observed")
    return WorkloadObservation(
        "SparkJob", obj["metadata"]["name"], mode, ready, message, _degraded(obj)
    )


Workload = TypeVar("Workload", KafkaSource, SparkJob)


def _parsed(model: type[Workload], obj: Obj) -> Workload | None:
    try:
        return model.model_validate(obj)
    except ValidationError:  # the workload reports it
        return None


def source_stage(obj: Obj, source: KafkaSource | None, connectors: ConnectorLoader) -> SourceStage:
    """A source as a stage of the delivery guarantee (``source``: its object as the
    model, None when that fails). Whether its connector can resume exactly is asked
    only of a source that merely requested it (one that requires it and cannot is
    refused and never runs); a spec or connector that cannot be read leaves the
    question to the source's own Degraded condition."""
    name, mode = obj["metadata"]["name"], observe_source(obj).observed_mode
    state = _recorded_state(obj)
    if source is None or source.spec.exactly_once_support is ExactlyOnceSupport.REQUIRED:
        return SourceStage(name, mode, state=state)
    config = source.spec.connector.config
    try:
        connector = connectors(source.spec.connector.type)
        if connector.exactly_once_support(config):
            return SourceStage(name, mode, state=state)
        why = connector.exactly_once_refusal(config)
    except Exception:  # a connector that cannot be loaded: the source reports it
        return SourceStage(name, mode, state=state)
    why = why or "no exactly-once support declared for its config"
    return SourceStage(name, mode, why, state=state)


def _recorded_state(obj: Obj) -> WorkloadState:
    try:
        return WorkloadState((obj.get("status") or {}).get("state") or WorkloadState.RUNNING)
    except ValueError:  # written by a newer operator: not this one's to judge
        return WorkloadState.RUNNING


def job_stage(obj: Obj, job: SparkJob | None) -> JobStage:
    name, mode = obj["metadata"]["name"], observe_spark_job(obj).observed_mode
    if job is None:  # unreadable: the job reports it, and does not run
        return JobStage(name, mode)
    spec = job.spec
    kafka = spec.sink.kafka
    return JobStage(
        name,
        mode,
        sources=tuple(spec.input.sources or ()),
        dedup=spec.dedup is not None,
        at_least_once_sink=kafka is not None and kafka.delivery is KafkaDelivery.AT_LEAST_ONCE,
        state=_recorded_state(obj),
    )


def workloads_degraded(workloads: list[WorkloadObservation]) -> tuple[bool, str, str]:
    """A Pipeline is Degraded while any of its workloads is, naming them and why."""
    degraded = [f"{w.label}: {w.degraded}" for w in workloads if w.degraded]
    if not degraded:
        return False, "Healthy", ""
    return True, "WorkloadDegraded", "; ".join(degraded)


HANGING_TRANSACTION = "HangingTransaction"


def hanging_degraded(
    found: list[Hanging], workloads: tuple[bool, str, str]
) -> tuple[bool, str, str]:
    """A partition held by an open transaction older than its writers may keep one:
    every read_committed reader of it waits there. A workload's own Degraded reason
    keeps the reason (the Reason column); the hang is added to the message."""
    message = (
        "; ".join(h.describe() for h in found)
        + ": every read_committed reader of it waits there; abort the transaction with "
        "`onceflow transactions abort --transactional-id ID --yes` (Onceflow's writers' "
        "ids are <transactionalIdPrefix>/source/<source>/<task> and "
        "<transactionalIdPrefix>/sink/<job>/<partition>; kafka-transactions.sh "
        "find-hanging names any producer's, and its abort ends one the coordinator lost)"
    )
    if workloads[0]:
        return True, workloads[1], f"{workloads[2]}; {message}"
    return True, HANGING_TRANSACTION, message


@dataclass
class PipelineReconciler:
    kube: KubeClient
    policy: TenantPolicy
    """What the platform allows a Pipeline (its transactional-id prefix)."""
    progress_deadline_s: float | None = None
    """A rollout in progress for longer is reported as Degraded (None: never)."""
    hanging: HangingWatch = field(default_factory=HangingWatch)
    hanging_after_s: float | None = None
    """How long a last stable offset may stand (None: the writers' longest transaction
    timeout, and a margin)."""
    rollout_steps: RolloutSteps = field(default_factory=RolloutSteps)
    hanging_counts: HangingCounts = field(default_factory=HangingCounts)

    @property
    def connectors(self) -> ConnectorLoader:
        return operator_loader(self.policy.connector_modules)

    @property
    def statuses(self) -> StatusWriter[PipelineStatus]:
        return StatusWriter(self.kube, PLURAL, PipelineStatus, self.progress_deadline_s)

    def _members(self, plural: str, namespace: str, name: str) -> list[Obj]:
        return [
            o
            for o in self.kube.list_objects(plural, namespace)
            if (o.get("spec") or {}).get("pipeline") == name
        ]

    def reconcile(self, namespace: str, name: str) -> bool:
        """One pass; answers whether the rollout settled at the spec's mode."""
        obj = self.kube.get(PLURAL, namespace, name)
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            self.hanging.follow(namespace, name, None)
            return True

        return reporting_failures(
            lambda: self._pass(obj), lambda: self.kube.get(PLURAL, namespace, name), self._degrade
        )

    def _watch_hanging(
        self, pipeline: Pipeline, sources: list[KafkaSource], jobs: list[SparkJob]
    ) -> list[Hanging]:
        """Tells the watch what the Pipeline's partitions are and how long its writers
        may keep a transaction open; returns what it found. A Secret the operator cannot
        read or use is its workloads' to report (and never this pass's failure): nothing
        is watched meanwhile."""
        namespace, name = pipeline.metadata.namespace, pipeline.metadata.name
        try:
            settings = pipeline_client_settings(self.kube, pipeline, self.policy.extra_secret_keys)
        except Exception:
            return self.hanging.follow(namespace, name, None)
        written, read_only = pipeline_topics(pipeline, sources, jobs)
        followed = Followed(
            pipeline.spec.kafka.bootstrap_servers,
            tuple(written),
            tuple(read_only),
            tuple(sorted(settings.items())),
            longest_transaction_timeout_s(sources, jobs),
            self.hanging_after_s,
        )
        return self.hanging.follow(namespace, name, followed)

    def _accept_prefix(self, obj: Obj, pipeline: Pipeline) -> Obj:
        """Records the prefix a Pipeline ran with under an operator from before
        prefixes were tied to namespaces: an upgrade stops no running pipeline. Only
        a status that operator wrote qualifies; this one always writes the field."""
        status = obj.get("status") or {}
        accepted = pipeline.spec.transactional_id_prefix or ""
        wire = {**status, ACCEPTED_PREFIX: accepted}
        self.kube.event(
            obj, "PrefixKept", f"transactionalIdPrefix {accepted!r} kept from before the upgrade"
        )
        return self.kube.replace_status(PLURAL, obj, wire)

    def _degrade(self, obj: Obj, reason: str, message: str) -> None:
        """A Pipeline that cannot be read (its spec fails the model) or reconciled: its
        rollout stays where it is, and status says why."""
        statuses = self.statuses
        status = statuses.read(obj)
        status = statuses.blocked(
            obj,
            status.model_copy(
                update={
                    "accepted_transactional_id_prefix": status.accepted_transactional_id_prefix
                    or ""
                }
            ),
            reason,
            message,
        )
        # What held before cannot be vouched for while the Pipeline is not reconciled.
        guarantee = set_condition(
            status.conditions,
            ConditionType.DELIVERY_GUARANTEE,
            None,
            Guarantee.UNKNOWN.value,
            f"the Pipeline cannot be reconciled ({reason})",
            now_rfc3339(),
            obj["metadata"].get("generation"),
        )
        statuses.write(obj, status.model_copy(update={"conditions": guarantee}))

    def _pass(self, obj: Obj) -> bool:
        pipeline = Pipeline.model_validate(obj)
        if _ran_before_prefix_rule(pipeline):
            obj = self._accept_prefix(obj, pipeline)
            pipeline = Pipeline.model_validate(obj)
        if refused := self.policy.pipeline_problems(pipeline):
            raise invalid_workload(refused)
        namespace, name = pipeline.metadata.namespace, pipeline.metadata.name
        sources = self._members("kafkasources", namespace, name)
        jobs = self._members("sparkjobs", namespace, name)
        workloads = sorted(
            [*map(observe_source, sources), *map(observe_spark_job, jobs)],
            key=lambda w: w.label,
        )
        degraded = workloads_degraded(workloads)
        # Parsed once for the guarantee and the hang watch; None where the model fails.
        models = [_parsed(KafkaSource, o) for o in sources]
        job_models = [_parsed(SparkJob, o) for o in jobs]
        readable_sources = [m for m in models if m is not None]
        readable_jobs = [m for m in job_models if m is not None]
        found = self._watch_hanging(pipeline, readable_sources, readable_jobs)
        self.hanging_counts.found((pipeline.metadata.namespace, pipeline.metadata.name), len(found))
        if found:
            degraded = hanging_degraded(found, degraded)
        if pipeline.status is None:
            status = PipelineStatus()
            current = resume_point(workloads, pipeline.spec.exactly_once)
        else:
            status = pipeline.status
            current = status.exactly_once.current
        decision = decide_rollout(current, pipeline.spec.exactly_once, workloads)
        target = pipeline.spec.exactly_once
        settled = decision.settled and decision.current is target
        updated = self.statuses.with_conditions(
            obj,
            status.model_copy(
                update={
                    "accepted_transactional_id_prefix": status.accepted_transactional_id_prefix
                    or "",
                    "exactly_once": RolloutStatus(
                        current=decision.current,
                        target=target,
                        step=decision.step,
                        waiting_for=list(decision.waiting_for),
                    ),
                    "workloads": [
                        WorkloadStatus(
                            kind=w.kind,
                            name=w.name,
                            observed_mode=w.observed_mode,
                            ready=w.ready,
                            message=w.message,
                        )
                        for w in workloads
                    ],
                }
            ),
            ready=(settled, "RolloutComplete" if settled else "RolloutInProgress", decision.detail),
            progressing=(
                not settled,
                "RolloutInProgress" if not settled else "Stable",
                decision.detail,
            ),
            degraded=degraded,
        )
        verdict = judge_delivery(
            decision.current,
            target,
            [source_stage(o, m, self.connectors) for o, m in zip(sources, models, strict=True)],
            [job_stage(o, m) for o, m in zip(jobs, job_models, strict=True)],
        )
        known = verdict.guarantee is not Guarantee.UNKNOWN
        conditions = set_condition(
            updated.conditions,
            ConditionType.DELIVERY_GUARANTEE,
            verdict.guarantee is Guarantee.EXACTLY_ONCE if known else None,
            verdict.guarantee.value,
            verdict.message,
            now_rfc3339(),
            updated.observed_generation,
        )
        written = self.statuses.write(obj, updated.model_copy(update={"conditions": conditions}))
        if written is not obj and decision.advanced:  # a write: the step is news
            self.kube.event(written, "RolloutStep", decision.detail)
        where = (pipeline.metadata.namespace, pipeline.metadata.name)
        self.rollout_steps.passed(where, current, decision)
        return settled
