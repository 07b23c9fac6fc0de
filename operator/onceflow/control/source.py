"""KafkaSource reconciler: task generations with fencing before pods (DESIGN 3.2).

Each pass: observe (source, pipeline, pods) -> validate (preflight) -> decide
(``plan_generation``, ``plan_pods``) -> record intent in status -> act -> record the
outcome. Every step is idempotent and the intent is written before acting, so an
operator killed at any point finishes the same step when it comes back.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial

from pydantic import ValidationError

from onceflow.api import KafkaSource, Pipeline
from onceflow.api.connector import Retention
from onceflow.api.pipeline import WorkloadState
from onceflow.api.source import (
    LISTED_OFFSETS,
    KafkaSourceStatus,
    OffsetsChangeResult,
    RetentionStatus,
    StoppedOffsets,
)
from onceflow.api.task import KubernetesAuthority
from onceflow.connectors.checks import (
    SOURCE_SYSTEM_REFUSED,
    SourceSystemCalls,
    StillAskingError,
    source_system_problems,
)
from onceflow.connectors.registry import ConnectorLoader, operator_loader
from onceflow.control.errors import InvalidWorkloadError, RetryLaterError
from onceflow.control.failures import reporting_failures
from onceflow.control.fencing import fence_with_backoff
from onceflow.control.graph import StoredGraph, claim_topics
from onceflow.control.kube import KubeClient, Obj
from onceflow.control.operator_metrics import generation_planned
from onceflow.control.status_writer import StatusWriter
from onceflow.control.workloads import (
    KAFKA_SETTING_REFUSED,
    current_mode,
    find_pipeline,
    invalid_workload,
    parse_workload,
    pipeline_client_settings,
    require_current_mode,
    where_in,
)
from onceflow.eos.fencing import FencingReport, fence_transactional_ids
from onceflow.eos.offset_changes import (
    SystemVerdict,
    judged_change,
    listed,
    write_offsets_change,
)
from onceflow.eos.offsets import carry_offsets, ensure_offsets_topic, read_offsets
from onceflow.logic.client_keys import refusal_message, refused_secret_keys
from onceflow.logic.fence_backoff import fence_failures, with_fence_failures
from onceflow.logic.generations import GenerationRecord, OffsetsOutcome
from onceflow.logic.pod_health import pods_problem
from onceflow.logic.protocol import (
    BackOff,
    CheckOffsets,
    Fence,
    Keep,
    Observed,
    RecordIntent,
    Start,
    Step,
    Stop,
    WaitGone,
    WriteOffsets,
    next_step,
)
from onceflow.logic.resolve import resolve_source
from onceflow.logic.source_status import (
    OFFSETS_CHANGE_EVENTS,
    STATE_CHANGES,
    at_rest,
    record_from_status,
    retention_condition,
    status_with_record,
    task_statuses,
    terminating,
    workers_from_pods,
)
from onceflow.logic.tenant_policy import TenantPolicy
from onceflow.model.names import legacy_task_transactional_ids
from onceflow.model.objects import (
    KAFKA_SECRET_MOUNT,
    LABEL_GENERATION,
    LABEL_SOURCE,
    METRICS_PORT,
    TASK_GRACE_SECONDS,
    WorkloadImage,
    configmap_name,
    generation_configmap,
    pod_template_hash,
    task_pod,
    task_rbac,
)
from onceflow.model.spark_app import digest
from onceflow.model.tasks import DesiredTasks

log = logging.getLogger(__name__)
PLURAL = "kafkasources"
MAX_STEPS_PER_PASS = 8
# A refused source (table missing, cluster down) is asked again at this pace.
SOURCE_CHECK_RETRY_S = 30.0
# How soon a pass comes back for a check still being answered.
SOURCE_SYSTEM_POLL_S = 2.0
# A new retention measurement wakes its source's loop at most this often.
RETENTION_WAKE_S = 30.0


def _refused_by_its_system(obj: Obj) -> bool:
    return any(
        c.get("type") == "Degraded"
        and c.get("status") == "True"
        and c.get("reason") == SOURCE_SYSTEM_REFUSED
        for c in (obj.get("status") or {}).get("conditions") or []
    )


def _digest(source: KafkaSource, secrets: Mapping[str, str]) -> str:
    """What a check's answer is about: the spec and the connector's Secret as asked,
    so that an answer about an edited source is never taken for the new one."""
    spec = source.spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    return digest({"spec": spec, "secrets": dict(sorted(secrets.items()))})


FenceIds = Callable[..., FencingReport]


@dataclass
class SourceReconciler:
    kube: KubeClient
    image: WorkloadImage
    graph: Callable[[], StoredGraph]
    """The stored topic graph (``graph.GraphReads``), shared with the other passes."""
    fence: FenceIds = fence_transactional_ids
    fence_timeout_s: float = 30.0
    policy: TenantPolicy = field(default_factory=TenantPolicy)
    progress_deadline_s: float | None = None
    """Progressing for longer is reported as Degraded (None: never)."""
    source_systems: SourceSystemCalls = field(default_factory=SourceSystemCalls)
    """Where checks and measurements of source systems run: never a reconcile worker."""
    answered: Callable[[str, str], None] = lambda namespace, name: None
    """Called with a source's namespace and name when its system has answered (the
    operator wakes the source's loop: a refusal shows at once, not at the next poll)."""
    _woken_at: dict[tuple[str, str], float] = field(default_factory=dict)
    """When a retention measurement last woke each source's loop (monotonic seconds)."""

    @property
    def connectors(self) -> ConnectorLoader:
        """Entry points, and module references only from modules the platform allows."""
        return operator_loader(self.policy.connector_modules)

    @property
    def statuses(self) -> StatusWriter[KafkaSourceStatus]:
        return StatusWriter(self.kube, PLURAL, KafkaSourceStatus, self.progress_deadline_s)

    # -- observe and validate -------------------------------------------------------

    def _desired(self, obj: Obj) -> tuple[KafkaSource, Pipeline, DesiredTasks]:
        source = parse_workload(KafkaSource, obj)
        namespace = source.metadata.namespace
        pipeline = find_pipeline(self.kube, namespace, source.spec.pipeline, self.policy)
        secret = pipeline.spec.kafka.auth_secret_ref if pipeline else None
        desired = resolve_source(
            source,
            pipeline,
            self.connectors,
            where=where_in(namespace),
            mode=current_mode(pipeline),
            kafka_config_dir=KAFKA_SECRET_MOUNT if secret else None,
        )
        if isinstance(desired, list):
            raise invalid_workload(desired)
        if refused := self.policy.image_problems(source.spec.image):
            raise invalid_workload(refused)
        require_current_mode(desired.pipeline)
        # Checked every pass, not only when fencing: tasks mount the same Secret.
        self._kafka_config(desired.pipeline)
        return source, desired.pipeline, desired

    def _kafka_config(self, pipeline: Pipeline) -> dict[str, str]:
        return pipeline_client_settings(self.kube, pipeline, self.policy.extra_secret_keys)

    # -- record ---------------------------------------------------------------------

    def _degrade(
        self,
        obj: Obj,
        reason: str,
        message: str,
        amend: Callable[[KafkaSourceStatus], KafkaSourceStatus] = lambda status: status,
    ) -> Obj:
        statuses = self.statuses
        return statuses.write(
            obj, statuses.blocked(obj, amend(statuses.read(obj)), reason, message)
        )

    # -- the pass -------------------------------------------------------------------

    def _record(self, obj: Obj, pipeline: Pipeline) -> GenerationRecord | None:
        name = obj["metadata"]["name"]
        prefix = pipeline.transactional_id_prefix
        return record_from_status(
            self.statuses.read(obj),
            lambda count: legacy_task_transactional_ids(prefix, name, count),
            obj["spec"].get("offsetsTopic") or f"{prefix}-{name}-offsets",
        )

    def reconcile(self, namespace: str, name: str) -> bool:
        """One pass; answers whether the source settled (every task of the fenced
        generation ready)."""
        obj = self.kube.get(PLURAL, namespace, name)
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            return True

        return reporting_failures(
            lambda: self._pass(obj), lambda: self.kube.get(PLURAL, namespace, name), self._degrade
        )

    def _pass(self, obj: Obj) -> bool:
        source, pipeline, desired = self._desired(obj)
        reads = self.connectors(source.spec.connector.type).kafka_reads(
            source.spec.connector.config
        )
        obj = claim_topics(self.kube, PLURAL, obj, source, pipeline, {}, reads, self.graph)
        namespace, name = source.metadata.namespace, source.metadata.name
        secret = pipeline.spec.kafka.auth_secret_ref
        template = pod_template_hash(source, self.image, secret.name if secret else None)
        # Each pass walks the protocol until it has to wait; a handful of steps is the
        # longest walk (intent, stop, fence, start, keep), the bound catches a bug.
        acted = False
        for _ in range(MAX_STEPS_PER_PASS):
            pods = self.kube.list_pods(namespace, f"{LABEL_SOURCE}={name}")
            record = self._record(obj, pipeline)
            step = next_step(
                record,
                desired.generation,
                Observed(workers_from_pods(pods), template),
                fence_failures(self.statuses.read(obj)),
                time.time(),
            )
            if isinstance(step, Keep):
                break
            obj = self._execute(obj, source, pipeline, desired, record, step)
            acted = True
        else:
            raise RetryLaterError(f"no steady state after {MAX_STEPS_PER_PASS} steps")
        assert record is not None
        if acted:
            # Steps ran (the pods were listed after them): the status is read afresh.
            obj = self.kube.get(PLURAL, namespace, name) or obj
        retention = self._retention(source, self.statuses.read(obj).retention)
        return self._record_outcome(obj, pods, record, retention)

    def _execute(
        self,
        obj: Obj,
        source: KafkaSource,
        pipeline: Pipeline,
        desired: DesiredTasks,
        record: GenerationRecord | None,
        step: Step,
    ) -> Obj:
        namespace = source.metadata.namespace
        if isinstance(step, RecordIntent):
            if record is None or record.generation != step.record.generation:
                # Before the intent: a source its system refuses never replaces (stops,
                # fences) a generation that runs; restarts within one are not asked.
                self._check_source_system(obj, source)
            return self._record_intent(obj, record, step.record)
        if isinstance(step, Stop):
            for pod in step.names:
                self.kube.delete_pod(namespace, pod, TASK_GRACE_SECONDS)
            return obj
        if isinstance(step, WaitGone):
            message = f"waiting for pod(s) {', '.join(step.names)} to be deleted: {step.reason}"
            self._wait(obj, "WaitingForPredecessors", message)
            raise RetryLaterError(message)
        if isinstance(step, BackOff):
            raise RetryLaterError(step.reason, step.delay_s)
        if isinstance(step, Fence):
            return self._fence(obj, pipeline, desired, step)
        if isinstance(step, CheckOffsets):
            outcome = self._check_offsets(source, desired, step)
            return self._record_offsets_change(obj, step.record.with_offsets_change(outcome))
        if isinstance(step, WriteOffsets):
            record = write_offsets_change(
                step,
                bootstrap=desired.bootstrap_servers,
                namespace=namespace,
                source=source.metadata.name,
                prefix=pipeline.transactional_id_prefix,
                extra=self._kafka_config(pipeline),
            )
            offsets = self._stopped_offsets(obj, desired, record)
            return self._record_offsets_change(obj, record, offsets)
        assert isinstance(step, Start) and record is not None
        self._create_generation(source, pipeline, desired, record, step.tasks)
        self.kube.event(
            obj, "PodsCreated", f"generation {step.generation}: task(s) {list(step.tasks)}"
        )
        self.kube.delete_configmaps(
            namespace,
            f"{LABEL_SOURCE}={source.metadata.name}",
            keep=configmap_name(source.metadata.name, step.generation),
        )
        return obj

    def _check_source_system(self, obj: Obj, source: KafkaSource) -> None:
        """No task pod starts for a source its system refuses (a missing table, an
        unreachable cluster): status says what to fix, the check is asked again later."""
        secret_ref = source.spec.connector.secret_ref
        secrets = self._connector_secrets(source)
        connector = self.connectors(source.spec.connector.type)
        if connector.secret_is_kafka_client_config and secret_ref is not None:
            refused = refused_secret_keys(secrets, self.policy.extra_secret_keys)
            if refused:
                message = refusal_message(secret_ref.name, refused, "spec.connector.secretRef")
                self._degrade(obj, KAFKA_SETTING_REFUSED, message)
                raise RetryLaterError(message, SOURCE_CHECK_RETRY_S)
        key = ("check", source.metadata.namespace, source.metadata.name, _digest(source, secrets))
        try:
            problems = source_system_problems(
                source.spec,
                secrets,
                shares_task_filesystem=False,
                load=self.connectors,
                ask=partial(
                    self.source_systems.answer,
                    key,
                    then=lambda _: self.answered(source.metadata.namespace, source.metadata.name),
                ),
            )
        except StillAskingError:
            message = "asking the source system whether the source can run"
            if not _refused_by_its_system(obj):  # a refusal stands until the answer
                self._wait(obj, "CheckingSourceSystem", message)
            raise RetryLaterError(message, SOURCE_SYSTEM_POLL_S) from None
        if problems:
            message = "; ".join(map(str, problems)) + "; no task starts until it is fixed"
            self._degrade(obj, SOURCE_SYSTEM_REFUSED, message)
            raise RetryLaterError(message, SOURCE_CHECK_RETRY_S)

    def _check_offsets(
        self, source: KafkaSource, desired: DesiredTasks, step: CheckOffsets
    ) -> OffsetsOutcome:
        """The source system is asked on the source systems' threads (a quick answer is
        taken in this pass, a later one wakes the next); one that cannot answer fails the
        pass, to be asked again: a refusal is for good, and an outage is not the change's
        fault."""
        namespace, name = source.metadata.namespace, source.metadata.name
        secrets = self._connector_secrets(source)

        def ask(call: Callable[[], SystemVerdict]) -> SystemVerdict:
            return self.source_systems.answer(
                ("offsets", namespace, name, step.request.id, _digest(source, secrets)),
                call,
                then=lambda _: self.answered(namespace, name),
            )

        try:
            return judged_change(
                step,
                self.connectors(source.spec.connector.type),
                source.spec.connector.config,
                secrets,
                ask,
                bootstrap=desired.bootstrap_servers,
                owner=f"{namespace}/{name}",
                legacy_owner=name,
                extra=self._kafka_config(desired.pipeline),
            )
        except StillAskingError:
            message = f"asking the source system whether change {step.request.id} can be set"
            raise RetryLaterError(message, SOURCE_SYSTEM_POLL_S) from None

    def _connector_secrets(self, source: KafkaSource) -> dict[str, str]:
        secret_ref = source.spec.connector.secret_ref
        secret = (
            self.kube.secret_if_present(source.metadata.namespace, secret_ref.name)
            if secret_ref
            else None
        )
        return dict(secret[0]) if secret else {}

    def _retention(
        self, source: KafkaSource, last: RetentionStatus | None
    ) -> RetentionStatus | None:
        """Asked on every pass that reaches the outcome (a settled source's resync
        included), on the source systems' threads, and taken by this pass when quick or
        by a later one, which a changed measurement wakes: a slot filling the database's
        disk shows while tasks still run.
        A system that cannot be asked (or a connector's failing hook) leaves ``last``
        in place: never a reason to fail the pass, nor to look healthy again."""
        connector = self.connectors(source.spec.connector.type)
        ref = (source.metadata.namespace, source.metadata.name)

        def wake_if_new(answered: Future[Retention | None]) -> None:
            """A measurement that would change status wakes the source's loop, at most
            once every RETENTION_WAKE_S: WAL growing steadily would keep it spinning."""
            if answered.cancelled() or answered.exception() is not None:
                return
            found = answered.result()
            fresh = None if found is None else RetentionStatus.measured(found)
            now = time.monotonic()
            if fresh != last and now - self._woken_at.get(ref, -RETENTION_WAKE_S) >= (
                RETENTION_WAKE_S
            ):
                self._woken_at[ref] = now
                self.answered(*ref)

        try:
            secrets = self._connector_secrets(source)
            found = self.source_systems.answer(
                ("retention", *ref, _digest(source, secrets)),
                lambda: connector.retention(source.spec.connector.config, secrets),
                then=wake_if_new,
            )
            return None if found is None else RetentionStatus.measured(found)
        except StillAskingError:  # measured on its own thread; the answer wakes a pass
            return last
        except Exception as error:  # a source system's or a connector's failure
            log.warning(
                "%s: what its source system keeps was not measured: %s", source.metadata.name, error
            )
            return last

    def _record_intent(
        self, obj: Obj, old: GenerationRecord | None, record: GenerationRecord
    ) -> Obj:
        """Intent first: from this write on, tasks of the old generation are superseded.
        Ready drops in the same write, so nobody reads the old generation's Ready next to
        the new generation number."""
        if old is not None and old.generation == record.generation and old.state != record.state:
            return self._record_state(obj, record)
        if old is not None and old.offsets_change != record.offsets_change:
            return self._record_offsets_change(obj, record)
        was = (
            f"was {len(old.ids)} in {old.mode}"
            if old is not None and old.generation != record.generation
            else "first of this incarnation"
            if old is None
            else "re-planned"
        )
        planned = (
            f"generation {record.generation}: {record.task_count} task(s) in mode "
            f"{record.mode} ({was})"
        )
        if old is None or old.generation != record.generation:
            generation_planned()
        obj = self.statuses.write(
            obj,
            self.statuses.with_conditions(
                obj,
                status_with_record(self.statuses.read(obj), record),
                ready=(False, "GenerationPlanned", planned),
                progressing=(True, "GenerationPlanned", planned),
                degraded=(False, "Healthy", ""),
            ),
        )
        self.kube.event(obj, "GenerationPlanned", planned)
        return obj

    def _record_state(self, obj: Obj, record: GenerationRecord) -> Obj:
        """A new state, recorded before any task is stopped or started: from this write
        on, the generation's tasks pause or end by it, whatever the operator does next."""
        reason, message = STATE_CHANGES[record.state]
        message = f"generation {record.generation}: {message}"
        status = status_with_record(self.statuses.read(obj), record)
        if record.state is not WorkloadState.STOPPED:
            status = status.model_copy(update={"offsets": None})  # they move again
        obj = self.statuses.write(
            obj,
            self.statuses.with_conditions(
                obj,
                status,
                ready=(False, reason, message),
                progressing=(True, reason, message),
                degraded=(False, "Healthy", ""),
            ),
        )
        self.kube.event(obj, reason, message)
        return obj

    def _record_offsets_change(
        self, obj: Obj, record: GenerationRecord, offsets: StoppedOffsets | None = None
    ) -> Obj:
        """What became of an offsets change, in status and as an event (with the offsets
        as they now are, when it was applied); the conditions are the next outcome's."""
        outcome = record.offsets_change
        assert outcome is not None
        status = status_with_record(self.statuses.read(obj), record)
        if offsets is not None:
            status = status.model_copy(update={"offsets": offsets})
        obj = self.statuses.write(obj, status)
        reason = OFFSETS_CHANGE_EVENTS[outcome.result]
        refused = outcome.result is OffsetsChangeResult.REFUSED
        self.kube.event(obj, reason, f"{outcome.id}: {outcome.message}", warning=refused)
        return obj

    def _wait(self, obj: Obj, reason: str, message: str) -> None:
        self.statuses.write(
            obj,
            self.statuses.with_conditions(
                obj,
                self.statuses.read(obj),
                ready=(False, reason, message),
                progressing=(True, reason, message),
                degraded=(False, reason, ""),
            ),
        )

    def _fence(self, obj: Obj, pipeline: Pipeline, desired: DesiredTasks, step: Fence) -> Obj:
        extra = self._kafka_config(pipeline)
        if step.ids:
            report = self._fence_ids(
                obj,
                desired.bootstrap_servers,
                step.ids,
                extra,
                f"no pod of generation {step.then.generation} starts until fencing succeeds",
            )
            self.kube.event(obj, "Fenced", f"{report.summary()}: {', '.join(step.ids)}")
        if step.carry_offsets is not None:
            old, new = step.carry_offsets
            copied = carry_offsets(
                desired.bootstrap_servers,
                old,
                new,
                f"{obj['metadata']['namespace']}/{obj['metadata']['name']}",
                legacy_owner=obj["metadata"]["name"],
                extra=extra,
            )
            self.kube.event(obj, "OffsetsCarried", f"{copied} offset(s) from {old} to {new}")
        fenced = status_with_record(self.statuses.read(obj), step.then)
        if step.then.stopped:
            offsets = self._stopped_offsets(obj, desired, step.then)
            fenced = fenced.model_copy(update={"offsets": offsets})
        return self.statuses.write(obj, with_fence_failures(fenced, None))

    def _stopped_offsets(
        self, obj: Obj, desired: DesiredTasks, record: GenerationRecord
    ) -> StoppedOffsets:
        """Read once nothing of the source can write, so they stay true until it runs."""
        name = obj["metadata"]["name"]
        extra = self._kafka_config(desired.pipeline)
        # A source created stopped (to seed its offsets) has no offsets topic yet.
        ensure_offsets_topic(desired.bootstrap_servers, record.offsets_topic, extra)
        stored = read_offsets(
            desired.bootstrap_servers,
            record.offsets_topic,
            f"{obj['metadata']['namespace']}/{name}",
            legacy_owner=name,
            extra=extra,
        )
        entries = listed(stored.by_partition)
        return StoppedOffsets.model_validate(
            {"count": len(entries), "partitions": entries[:LISTED_OFFSETS]}
        )

    def _fence_ids(
        self,
        obj: Obj,
        bootstrap_servers: str,
        ids: Sequence[str],
        extra: dict[str, str],
        blocked: str,
    ) -> FencingReport:
        """Fences ``ids`` within the backoff this source's status records."""
        return fence_with_backoff(
            lambda: self.fence(bootstrap_servers, ids, extra=extra, timeout_s=self.fence_timeout_s),
            fence_failures(self.statuses.read(obj)),
            lambda message, failures: self._degrade(
                obj,
                "FencingFailed",
                message,
                lambda status: with_fence_failures(status, failures),
            ),
            blocked,
            "KafkaSource",
        )

    def _create_generation(
        self,
        source: KafkaSource,
        pipeline: Pipeline,
        desired: DesiredTasks,
        record: GenerationRecord,
        task_ids: Sequence[int],
    ) -> None:
        authority = KubernetesAuthority(
            namespace=source.metadata.namespace, name=source.metadata.name
        )
        settings = desired.settings(
            record.generation, authority, metrics_port=METRICS_PORT, incarnation=record.incarnation
        )
        for manifest in task_rbac(source.metadata.namespace):
            self.kube.ensure(manifest)
        self.kube.apply_configmap(generation_configmap(source, settings))
        secret = pipeline.spec.kafka.auth_secret_ref
        for task_id in task_ids:
            self.kube.create_pod(
                task_pod(source, settings[task_id], self.image, secret.name if secret else None)
            )

    def _record_outcome(
        self,
        latest: Obj,
        pods: list[Obj],
        record: GenerationRecord,
        retention: RetentionStatus | None,
    ) -> bool:
        status = self.statuses.read(latest)
        tasks = task_statuses(pods, record.generation)
        ready = sum(1 for t in tasks if t.ready)
        count = record.task_count
        all_ready = ready == count and status.fenced_generation == status.generation
        message = (
            f"generation {status.generation}: {ready}/{count} task(s) running in mode {status.mode}"
        )
        status = status.model_copy(
            update={"tasks": tasks, "ready_tasks": ready, "retention": retention}
        )
        if record.state is not WorkloadState.RUNNING:
            all_ready, reason, message = at_rest(record, ready)
            progressing: tuple[bool, str, str] = (not all_ready, reason, message)
        else:
            reason = "TasksRunning" if all_ready else "TasksStarting"
            progressing = (not all_ready, "TasksStarting" if not all_ready else "Stable", message)
        current = [
            pod
            for pod in pods
            if (pod["metadata"].get("labels") or {}).get(LABEL_GENERATION) == str(record.generation)
        ]
        # A task that keeps failing (a broker it cannot reach, a refusal) says why in its
        # pod; it becomes the source's Degraded reason instead of a bare "1/3 running".
        trouble = pods_problem(current, datetime.now(UTC))
        status = self.statuses.with_conditions(
            latest,
            status,
            ready=(all_ready, reason, message),
            progressing=progressing,
            degraded=(
                (True, trouble.reason, trouble.message)
                if trouble
                else retention_condition(retention)
            ),
        )
        self.statuses.write(latest, status)
        return all_ready

    def _fencing_on_deletion(self, obj: Obj) -> tuple[Pipeline, dict[str, str]] | str:
        """The Pipeline and client settings to fence a deleted source's ids with, or why
        there are none: a directory deleted with ``kubectl delete -f`` removes the
        Pipeline or its Secret in any order relative to the source."""
        wanted = obj["spec"]["pipeline"]
        pipeline_obj = self.kube.get("pipelines", obj["metadata"]["namespace"], wanted)
        if pipeline_obj is None:
            return f"Pipeline {wanted!r} is gone"
        try:
            pipeline = Pipeline.model_validate(pipeline_obj)
            return pipeline, self._kafka_config(pipeline)
        except (InvalidWorkloadError, ValidationError) as unusable:
            return f"Pipeline {wanted!r} cannot be used ({unusable})"

    def finalize(self, namespace: str, name: str) -> None:
        """Deletion: stop the pods, fence every id the record knows (the predecessor's
        too while fencing is pending), keep the offsets topic (data is never deleted
        implicitly), then let the finalizer go. Without the Pipeline there is no broker
        address to fence with: the pods must then be gone instead."""
        obj = self.kube.get(PLURAL, namespace, name)
        if obj is None:
            return
        pods = self.kube.list_pods(namespace, f"{LABEL_SOURCE}={name}")
        for pod in pods:
            if not terminating(pod):
                self.kube.delete_pod(namespace, pod["metadata"]["name"], TASK_GRACE_SECONDS)
        fencing = self._fencing_on_deletion(obj)
        if isinstance(fencing, str):
            if pods:
                raise RetryLaterError(
                    f"{fencing}, so its ids cannot be fenced: waiting until the task pods are gone",
                    5.0,
                )
            unfenced = ", ".join(self.statuses.read(obj).transactional_ids or []) or "none recorded"
            self.kube.event(
                obj,
                "DeletedUnfenced",
                f"{fencing}: transactional ids ({unfenced}) were not fenced; a transaction a "
                "killed task left open holds read_committed readers back until it times out",
                warning=True,
            )
        else:
            pipeline, extra = fencing
            record = self._record(obj, pipeline)
            ids = (
                ()
                if record is None
                else record.ids + (record.previous_ids if record.fencing_pending else ())
            )
            if ids:
                self._fence_ids(
                    obj,
                    pipeline.spec.kafka.bootstrap_servers,
                    ids,
                    extra,
                    "the source is deleted once its transactional ids are fenced",
                )
        self.kube.delete_configmaps(namespace, f"{LABEL_SOURCE}={name}", keep=None)
