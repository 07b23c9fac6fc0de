"""KafkaSource reconciler: task generations with fencing before pods (DESIGN 3.2).

Each pass: observe (source, pipeline, pods) -> validate (preflight) -> decide
(``plan_generation``, ``plan_pods``) -> record intent in status -> act -> record the
outcome. Every step is idempotent and the intent is written before acting, so an
operator killed at any point finishes the same step when it comes back.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from onceflow.api import KafkaSource, Pipeline
from onceflow.api.source import KafkaSourceStatus
from onceflow.api.task import KubernetesAuthority
from onceflow.control.errors import InvalidWorkloadError, RetryLaterError
from onceflow.control.kube import KubeClient, Obj, now_rfc3339
from onceflow.control.workloads import parse_workload, pipeline_mode, workload_pipeline
from onceflow.eos.fencing import FencingReport, fence_transactional_ids
from onceflow.logic.conditions import set_conditions
from onceflow.logic.generations import GenerationAction, GenerationPlan, plan_generation
from onceflow.logic.preflight import preflight_source
from onceflow.logic.source_status import (
    plan_pods,
    record_from_status,
    status_with_record,
    task_statuses,
    terminating,
)
from onceflow.model.names import task_transactional_ids
from onceflow.model.objects import (
    KAFKA_SECRET_MOUNT,
    LABEL_SOURCE,
    METRICS_PORT,
    TASK_GRACE_SECONDS,
    configmap_name,
    generation_configmap,
    task_pod,
    task_rbac,
)
from onceflow.model.tasks import DesiredTasks, desired_tasks
from onceflow.runtime.plugins import UnknownConnectorError, load_connector

log = logging.getLogger(__name__)
PLURAL = "kafkasources"
# Fencing failures usually mean a broker or an ACL is missing: back off so the
# operator neither hammers the broker nor hides the problem behind constant retries.
FENCE_BACKOFF_S = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0)

Fence = Callable[..., FencingReport]


@dataclass
class SourceReconciler:
    kube: KubeClient
    default_image: str
    fence: Fence = fence_transactional_ids
    fence_timeout_s: float = 30.0
    fence_failures: dict[str, int] = field(default_factory=dict)
    next_fence_attempt: dict[str, float] = field(default_factory=dict)

    # -- observe and validate -------------------------------------------------------

    def _desired(self, obj: Obj) -> tuple[KafkaSource, Pipeline, DesiredTasks]:
        source = parse_workload(KafkaSource, obj)
        pipeline = workload_pipeline(self.kube, source.metadata.namespace, source.spec.pipeline)
        try:
            connector = load_connector(source.spec.connector.type)
        except UnknownConnectorError as error:
            raise InvalidWorkloadError("InvalidSpec", str(error)) from None
        problems = preflight_source(source.spec, connector)
        if problems:
            raise InvalidWorkloadError("InvalidSpec", "; ".join(f"{p}: {m}" for p, m in problems))
        configs = connector.task_configs(source.spec.connector.config, source.spec.tasks_max)
        secret = pipeline.spec.kafka.auth_secret_ref
        desired = desired_tasks(
            pipeline,
            source,
            configs,
            mode=pipeline_mode(pipeline),
            kafka_config_dir=KAFKA_SECRET_MOUNT if secret else None,
        )
        return source, pipeline, desired

    def _kafka_config(self, pipeline: Pipeline) -> dict[str, str]:
        secret = pipeline.spec.kafka.auth_secret_ref
        if secret is None:
            return {}
        return self.kube.secret_data(pipeline.metadata.namespace, secret.name)

    # -- record ---------------------------------------------------------------------

    def _write(self, obj: Obj, status: KafkaSourceStatus) -> Obj:
        wire = status.to_wire()
        if obj.get("status") == wire:
            return obj
        return self.kube.replace_status(PLURAL, obj, wire)

    def _status(self, obj: Obj) -> KafkaSourceStatus:
        return KafkaSourceStatus.model_validate(obj.get("status") or {})

    def _conditions(
        self,
        obj: Obj,
        status: KafkaSourceStatus,
        *,
        ready: tuple[bool, str, str],
        progressing: tuple[bool, str, str],
        degraded: tuple[bool, str, str],
    ) -> KafkaSourceStatus:
        generation = obj["metadata"].get("generation")
        return status.model_copy(
            update={
                "observed_generation": generation,
                "conditions": set_conditions(
                    status.conditions,
                    ready=ready,
                    progressing=progressing,
                    degraded=degraded,
                    now=now_rfc3339(),
                    observed_generation=generation,
                ),
            }
        )

    def _degrade(self, obj: Obj, reason: str, message: str) -> Obj:
        status = self._conditions(
            obj,
            self._status(obj),
            ready=(False, reason, message),
            progressing=(False, reason, "blocked until the problem is fixed"),
            degraded=(True, reason, message),
        )
        if obj.get("status") != status.to_wire():
            self.kube.event(obj, reason, message, warning=True)
        return self._write(obj, status)

    # -- the pass -------------------------------------------------------------------

    def reconcile(self, namespace: str, name: str) -> None:
        obj = self.kube.get(PLURAL, namespace, name)
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            return
        try:
            source, pipeline, desired = self._desired(obj)
        except InvalidWorkloadError as error:
            self._degrade(obj, error.reason, str(error))
            return
        status = self._status(obj)
        plan = plan_generation(
            record_from_status(status),
            prefix=pipeline.transactional_id_prefix,
            source=name,
            task_count=desired.task_count,
            mode=desired.mode,
            desired_fingerprint=desired.fingerprint,
        )
        pods = self.kube.list_pods(namespace, f"{LABEL_SOURCE}={name}")
        if plan.action is GenerationAction.KEEP:
            self._keep(obj, source, pipeline, desired, plan, pods)
        else:
            obj = self._roll(obj, source, pipeline, desired, plan, pods)
        self._record_outcome(obj, plan)

    def _roll(
        self,
        obj: Obj,
        source: KafkaSource,
        pipeline: Pipeline,
        desired: DesiredTasks,
        plan: GenerationPlan,
        pods: Sequence[Obj],
    ) -> Obj:
        record = plan.record
        key = f"{source.metadata.namespace}/{source.metadata.name}"
        if plan.action is not GenerationAction.FINISH_FENCING:
            # Intent first: from this write on, tasks of the old generation are superseded.
            # Ready drops in the same write, so nobody reads the old generation's Ready
            # next to the new generation number.
            planned = (
                f"generation {record.generation}: {record.task_count} task(s) in mode "
                f"{record.mode} (was {record.previous_task_count} in {record.previous_mode})"
            )
            obj = self._write(
                obj,
                self._conditions(
                    obj,
                    status_with_record(self._status(obj), record),
                    ready=(False, "GenerationPlanned", planned),
                    progressing=(True, "GenerationPlanned", planned),
                    degraded=(False, "Healthy", ""),
                ),
            )
            self.kube.event(obj, "GenerationPlanned", planned)
        stale = [
            p
            for p in pods
            if p["metadata"]["labels"].get("onceflow.io/generation") != str(record.generation)
        ]
        for pod in stale:
            if not terminating(pod):
                self.kube.delete_pod(
                    source.metadata.namespace, pod["metadata"]["name"], TASK_GRACE_SECONDS
                )
        if plan.predecessors_must_be_gone and stale:
            names = ", ".join(p["metadata"]["name"] for p in stale)
            message = (
                f"waiting for pod(s) {names} to be deleted: generation "
                f"{record.generation - 1} was not transactional and cannot be fenced"
            )
            self._write(
                obj,
                self._conditions(
                    obj,
                    self._status(obj),
                    ready=(False, "WaitingForPredecessors", message),
                    progressing=(True, "WaitingForPredecessors", message),
                    degraded=(False, "WaitingForPredecessors", ""),
                ),
            )
            raise RetryLaterError(message)
        if plan.fence_ids:
            if time.monotonic() < self.next_fence_attempt.get(key, 0.0):
                raise RetryLaterError("fencing backoff")
            report = self.fence(
                desired.bootstrap_servers,
                plan.fence_ids,
                extra=self._kafka_config(pipeline),
                timeout_s=self.fence_timeout_s,
            )
            if not report.ok:
                failures = self.fence_failures.get(key, 0)
                delay = FENCE_BACKOFF_S[min(failures, len(FENCE_BACKOFF_S) - 1)]
                self.fence_failures[key] = failures + 1
                self.next_fence_attempt[key] = time.monotonic() + delay
                message = (
                    f"{report.summary()}; no pod of generation {record.generation} starts "
                    f"until fencing succeeds (retrying in {delay:.0f}s)"
                )
                self._degrade(obj, "FencingFailed", message)
                raise RetryLaterError(message, delay)
            self.fence_failures.pop(key, None)
            self.kube.event(obj, "Fenced", f"{report.summary()}: {', '.join(plan.fence_ids)}")
        obj = self._write(obj, status_with_record(self._status(obj), record.with_fenced()))
        self._create_generation(
            source, pipeline, desired, record.generation, range(record.task_count)
        )
        self.kube.event(
            obj, "PodsCreated", f"generation {record.generation}: {record.task_count} pod(s)"
        )
        self.kube.delete_configmaps(
            source.metadata.namespace,
            f"{LABEL_SOURCE}={source.metadata.name}",
            keep=configmap_name(source.metadata.name, record.generation),
        )
        return obj

    def _keep(
        self,
        obj: Obj,
        source: KafkaSource,
        pipeline: Pipeline,
        desired: DesiredTasks,
        plan: GenerationPlan,
        pods: Sequence[Obj],
    ) -> None:
        actions = plan_pods(pods, plan.record.generation, plan.record.task_count)
        for name in actions.delete:
            self.kube.delete_pod(source.metadata.namespace, name, TASK_GRACE_SECONDS)
        if actions.create:
            # A lost pod of the current generation comes back in the same generation:
            # its task's init_transactions fences whatever is left of the old one.
            self._create_generation(
                source, pipeline, desired, plan.record.generation, actions.create
            )
            self.kube.event(
                obj,
                "PodsRecreated",
                f"task(s) {list(actions.create)} of generation {plan.record.generation}",
            )

    def _create_generation(
        self,
        source: KafkaSource,
        pipeline: Pipeline,
        desired: DesiredTasks,
        generation: int,
        task_ids: Any,
    ) -> None:
        authority = KubernetesAuthority(
            namespace=source.metadata.namespace, name=source.metadata.name
        )
        settings = desired.settings(generation, authority, metrics_port=METRICS_PORT)
        for manifest in task_rbac(source.metadata.namespace):
            self.kube.ensure(manifest)
        self.kube.apply_configmap(generation_configmap(source, settings))
        secret = pipeline.spec.kafka.auth_secret_ref
        for task_id in task_ids:
            self.kube.create_pod(
                task_pod(
                    source, settings[task_id], self.default_image, secret.name if secret else None
                )
            )

    def _record_outcome(self, obj: Obj, plan: GenerationPlan) -> None:
        namespace, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
        latest = self.kube.get(PLURAL, namespace, name) or obj
        status = self._status(latest)
        pods = self.kube.list_pods(namespace, f"{LABEL_SOURCE}={name}")
        tasks = task_statuses(pods, plan.record.generation)
        ready = sum(1 for t in tasks if t.ready)
        count = plan.record.task_count
        all_ready = ready == count and status.fenced_generation == status.generation
        message = (
            f"generation {status.generation}: {ready}/{count} task(s) running in mode {status.mode}"
        )
        status = status.model_copy(update={"tasks": tasks, "ready_tasks": ready})
        status = self._conditions(
            latest,
            status,
            ready=(all_ready, "TasksRunning" if all_ready else "TasksStarting", message),
            progressing=(not all_ready, "TasksStarting" if not all_ready else "Stable", message),
            degraded=(False, "Healthy", ""),
        )
        self._write(latest, status)

    def finalize(self, namespace: str, name: str) -> None:
        """Deletion: stop the pods, fence the last generation, keep the offsets topic
        (data is never deleted implicitly), then let the finalizer go."""
        obj = self.kube.get(PLURAL, namespace, name)
        if obj is None:
            return
        for pod in self.kube.list_pods(namespace, f"{LABEL_SOURCE}={name}"):
            if not terminating(pod):
                self.kube.delete_pod(namespace, pod["metadata"]["name"], TASK_GRACE_SECONDS)
        record = record_from_status(self._status(obj))
        pipeline_obj = self.kube.get("pipelines", namespace, obj["spec"]["pipeline"])
        if record is not None and pipeline_obj is not None and record.task_count:
            pipeline = Pipeline.model_validate(pipeline_obj)
            ids = task_transactional_ids(pipeline.transactional_id_prefix, name, record.task_count)
            report = self.fence(
                pipeline.spec.kafka.bootstrap_servers,
                ids,
                extra=self._kafka_config(pipeline),
                timeout_s=self.fence_timeout_s,
            )
            if not report.ok:
                raise RetryLaterError(f"fencing before deletion: {report.summary()}", 5.0)
        self.kube.delete_configmaps(namespace, f"{LABEL_SOURCE}={name}", keep=None)
