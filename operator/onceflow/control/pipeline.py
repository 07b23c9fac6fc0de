"""Pipeline reconciler: the gated two-phase rollout across every workload (DESIGN 3.3).

It publishes the pipeline's *current* mode in status; sources and Spark jobs converge
on it and report back. Only when every workload runs the current mode and is ready
does the pipeline take the next step toward ``spec.exactlyOnce``.
"""

from __future__ import annotations

from dataclasses import dataclass

from onceflow.api import ExactlyOnceMode, Pipeline
from onceflow.api.pipeline import PipelineStatus, RolloutStatus, WorkloadStatus
from onceflow.api.status import ConditionStatus, ConditionType
from onceflow.control.kube import KubeClient, Obj, now_rfc3339
from onceflow.logic.conditions import set_conditions
from onceflow.logic.rollout import (
    WorkloadObservation,
    decide_rollout,
    resume_point,
)

PLURAL = "pipelines"


def _condition(obj: Obj, type_: ConditionType) -> dict[str, str]:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == type_.value:
            return dict(condition)
    return {}


def observe_source(obj: Obj) -> WorkloadObservation:
    """A source counts in a mode once that generation is fenced and all tasks run."""
    status = obj.get("status") or {}
    settled = status.get("generation") and status.get("generation") == status.get(
        "fencedGeneration"
    )
    mode = ExactlyOnceMode(status["mode"]) if settled and status.get("mode") else None
    ready = _condition(obj, ConditionType.READY).get("status") == ConditionStatus.TRUE.value
    message = "" if ready else _condition(obj, ConditionType.READY).get("message", "not observed")
    return WorkloadObservation("KafkaSource", obj["metadata"]["name"], mode, ready, message)


def observe_spark_job(obj: Obj) -> WorkloadObservation:
    status = obj.get("status") or {}
    mode = ExactlyOnceMode(status["observedMode"]) if status.get("observedMode") else None
    ready = _condition(obj, ConditionType.READY).get("status") == ConditionStatus.TRUE.value
    message = "" if ready else _condition(obj, ConditionType.READY).get("message", "not observed")
    return WorkloadObservation("SparkJob", obj["metadata"]["name"], mode, ready, message)


@dataclass
class PipelineReconciler:
    kube: KubeClient

    def observe_workloads(self, namespace: str, name: str) -> list[WorkloadObservation]:
        sources = [
            observe_source(o)
            for o in self.kube.list_objects("kafkasources", namespace)
            if (o.get("spec") or {}).get("pipeline") == name
        ]
        jobs = [
            observe_spark_job(o)
            for o in self.kube.list_objects("sparkjobs", namespace)
            if (o.get("spec") or {}).get("pipeline") == name
        ]
        return sorted(sources + jobs, key=lambda w: w.label)

    def reconcile(self, namespace: str, name: str) -> bool:
        """One pass; answers whether the rollout settled at the spec's mode."""
        obj = self.kube.get(PLURAL, namespace, name)
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            return True
        pipeline = Pipeline.model_validate(obj)
        workloads = self.observe_workloads(namespace, name)
        if pipeline.status is None:
            status = PipelineStatus()
            current = resume_point(workloads)
        else:
            status = pipeline.status
            current = status.exactly_once.current
        decision = decide_rollout(current, pipeline.spec.exactly_once, workloads)
        target = pipeline.spec.exactly_once
        settled = decision.settled and decision.current is target
        generation = obj["metadata"].get("generation")
        updated = status.model_copy(
            update={
                "observed_generation": generation,
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
                "conditions": set_conditions(
                    status.conditions,
                    ready=(
                        settled,
                        "RolloutComplete" if settled else "RolloutInProgress",
                        decision.step,
                    ),
                    progressing=(
                        not settled,
                        "RolloutInProgress" if not settled else "Stable",
                        decision.step,
                    ),
                    degraded=(False, "Healthy", ""),
                    now=now_rfc3339(),
                    observed_generation=generation,
                ),
            }
        )
        wire = updated.to_wire()
        if obj.get("status") != wire:
            obj = self.kube.replace_status(PLURAL, obj, wire)
            if decision.advanced:
                self.kube.event(obj, "RolloutStep", decision.step)
        return settled
