"""SparkJob reconciler: renders the job's settings ConfigMap and its driver -- the Spark
operator's SparkApplication, or with ``submitter: spark-submit`` a Job whose pod is
the driver -- for the pipeline's current mode, and reports the mode back so the
rollout can gate on it (DESIGN 3.3, 3.4).

A pass observes once (the job, its Pipeline, the driver's settings), then walks the
SparkJob plan (``logic.spark_plan``): look at the status, the driver object and the
pods, ask the plan for the next step, execute it, until a step must wait (RetryLater)
or the driver runs as the spec asks. Every decision -- a state, an input reset, a
sink handover, a restart, a submit -- is the plan's; this module only acts.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from kubernetes.client.exceptions import ApiException

from onceflow.api import ExactlyOnceMode, Pipeline
from onceflow.api.driver import SparkJobSettings
from onceflow.api.input_reset import InputResetResult, InputResetStatus
from onceflow.api.pipeline import WorkloadState, effective_state
from onceflow.api.spark import SparkJob, SparkJobStatus, Submitter
from onceflow.control.errors import InvalidWorkloadError, RetryLaterError
from onceflow.control.failures import reporting_failures
from onceflow.control.fencing import fence_with_backoff, waiting_for_backoff
from onceflow.control.graph import StoredGraph, claim_topics
from onceflow.control.kube import ALL_NAMESPACES, HTTP_NOT_FOUND, KubeClient, Obj
from onceflow.control.ownership import is_ours, refuse_unless_ours
from onceflow.control.status_writer import StatusWriter
from onceflow.control.workloads import (
    current_mode,
    find_pipeline,
    invalid_workload,
    parse_workload,
    pipeline_client_settings,
    require_current_mode,
    where_in,
)
from onceflow.eos.fencing import FencingReport, fence_transactional_ids
from onceflow.logic.fence_backoff import fence_failures, with_fence_failures
from onceflow.logic.input_reset import with_input_reset
from onceflow.logic.pod_health import creation_refused, pods_problem
from onceflow.logic.query_progress import driver_progress
from onceflow.logic.resolve import resolve_spark_job, transform_code_problem
from onceflow.logic.sink_handover import FenceSink, RecordSink, SinkProducers, StopDriver
from onceflow.logic.spark_plan import (
    COMPLETED,
    BackOff,
    DriverExited,
    DriverSeen,
    DriverStep,
    Keep,
    RecordInputReset,
    Restart,
    SettlingStep,
    SparkDesired,
    SparkObservation,
    SparkRecord,
    SparkRunning,
    Submit,
    SwitchSubmitter,
    WaitPreviousDriver,
    WriteSettings,
    next_spark_step,
)
from onceflow.logic.spark_state import (
    SPARK_STATE_CHANGES,
    FenceSinkIds,
    HeldStill,
    RecordState,
    RemoveDriver,
    WaitPodsGone,
)
from onceflow.logic.tenant_policy import TenantPolicy
from onceflow.logic.topic_ownership import CHECKPOINT_CONFLICT
from onceflow.model.checkpoint_places import place_of
from onceflow.model.objects import (
    LABEL_CHECKPOINT,
    LABEL_SPARKJOB,
    WorkloadImage,
    spark_pod_labels,
)
from onceflow.model.spark_app import (
    SPEC_HASH_ANNOTATION,
    digest,
    job_configmap,
    job_configmap_name,
)
from onceflow.model.submission import SUBMISSIONS, Submission, submission_of

PLURAL = "sparkjobs"
# Drivers stop their query and executors on SIGTERM within seconds; the checkpoint
# makes a hard stop after that safe.
SPARK_POD_GRACE_S = 30
# The longest pass is seven steps (reset, state, sink, settings, previous driver gone,
# submit, keep); the bound catches a plan that never settles.
MAX_STEPS_PER_PASS = 12
# What waits while fencing fails, as the Degraded message says it.
HELD_UNTIL_FENCED = "the job is held still once its sink's ids are fenced"
STOPPED_UNTIL_FENCED = "the application stays stopped until fencing succeeds"


@dataclass
class _Pass:
    """One pass over a job: what it observed once, and what it did since that no
    record holds (a new pass looks again)."""

    obj: Obj
    job: SparkJob
    pipeline: Pipeline
    mode: ExactlyOnceMode
    settings: SparkJobSettings
    submission: Submission
    application: Obj | None
    other_submitter: Submitter | None = None
    settings_written: bool = False
    previous_gone: bool = False


@dataclass(frozen=True)
class _Seen:
    """One look within a pass: the plan's observation, and what its steps act with."""

    status: SparkJobStatus
    settings: SparkJobSettings
    """The driver's, with the sink's recorded previous prefix."""
    desired: Obj
    """The driver object as it would be submitted now."""
    pods: list[Obj]
    observation: SparkObservation


def _spec_hash(driver: Obj) -> str | None:
    return ((driver.get("metadata") or {}).get("annotations") or {}).get(SPEC_HASH_ANNOTATION)


def _blocked(fence: FenceSinkIds | FenceSink) -> str:
    return HELD_UNTIL_FENCED if isinstance(fence, FenceSinkIds) else STOPPED_UNTIL_FENCED


@dataclass
class SparkJobReconciler:
    kube: KubeClient
    image: WorkloadImage
    spark_version: str
    graph: Callable[[], StoredGraph]
    """The stored topic graph (``graph.GraphReads``), shared with the other passes."""
    fence: Callable[..., FencingReport] = fence_transactional_ids
    fence_timeout_s: float = 30.0
    policy: TenantPolicy = field(default_factory=TenantPolicy)
    progress_deadline_s: float | None = None
    """Progressing for longer is reported as Degraded (None: never)."""

    @property
    def statuses(self) -> StatusWriter[SparkJobStatus]:
        return StatusWriter(self.kube, PLURAL, SparkJobStatus, self.progress_deadline_s)

    def _write(
        self,
        obj: Obj,
        status: SparkJobStatus,
        ready: bool,
        reason: str,
        message: str,
        degraded: bool = False,
    ) -> Obj:
        """A job's three conditions say one thing: ready, on its way (Progressing), or
        stuck (Degraded), with one reason and message."""
        statuses = self.statuses
        return statuses.write(
            obj,
            statuses.with_conditions(
                obj,
                status,
                ready=(ready, reason, message),
                progressing=(not ready and not degraded, reason, message),
                degraded=(degraded, reason, message if degraded else ""),
            ),
        )

    def _degrade(self, obj: Obj, reason: str, message: str) -> Obj:
        return self._write(obj, self.statuses.read(obj), False, reason, message, degraded=True)

    def _observe(
        self, obj: Obj
    ) -> tuple[Obj, SparkJob, Pipeline, ExactlyOnceMode, SparkJobSettings]:
        """The job, its Pipeline, the mode it runs in and its driver's settings; and
        the object as it is once the job's claim on its topics is recorded."""
        job = parse_workload(SparkJob, obj)
        namespace = job.metadata.namespace
        pipeline = find_pipeline(self.kube, namespace, job.spec.pipeline, self.policy)
        topics = {}
        for name in job.spec.input.sources or []:
            source = self.kube.get("kafkasources", namespace, name)
            if source is not None:
                topics[name] = source["spec"]["topic"]
        settings = resolve_spark_job(
            job, pipeline, topics, where=where_in(namespace), mode=current_mode(pipeline)
        )
        if isinstance(settings, list):
            raise invalid_workload(settings)
        if refused := self.policy.spark_job_problems(job):
            raise invalid_workload(refused)
        code = job.spec.transform.config_map
        files = self.kube.configmap_data(namespace, code) if code else None
        missing_code = transform_code_problem(job, files, where_in(namespace))
        if missing_code:
            raise invalid_workload([missing_code])
        if files is not None:
            settings = settings.model_copy(update={"transform_code_digest": digest(files)})
        # A reset is applied only while the job is held, so no driver runs on settings
        # older than the reset recorded.
        settings = with_input_reset(settings, self.statuses.read(obj).input_reset)
        assert pipeline is not None, "a job resolves only with its Pipeline"
        # Checked every pass: drivers and executors mount the same Secret.
        pipeline_client_settings(self.kube, pipeline, self.policy.extra_secret_keys)
        mode = require_current_mode(pipeline)
        obj = claim_topics(self.kube, PLURAL, obj, job, pipeline, topics, (), self.graph)
        return obj, job, pipeline, mode, settings

    def reconcile(self, namespace: str, name: str) -> bool:
        """One pass; answers whether the job settled (its driver running or, for an
        availableNow run, completed)."""
        obj = self.kube.get(PLURAL, namespace, name)
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            return True

        return reporting_failures(
            lambda: self._pass(obj), lambda: self.kube.get(PLURAL, namespace, name), self._degrade
        )

    def _pass(self, obj: Obj) -> bool:
        obj, job, pipeline, mode, settings = self._observe(obj)
        submission = submission_of(job)
        application = self._get(submission, job)
        run = _Pass(obj, job, pipeline, mode, settings, submission, application)
        if application is None:
            # Only before creating its own driver object can another submitter's exist.
            run.other_submitter = self._other_submitter(job)
        for _ in range(MAX_STEPS_PER_PASS):
            seen = self._look(run)
            step = next_spark_step(seen.observation)
            if isinstance(step, DriverStep):
                settled = self._drive(run, seen, step)
            else:
                settled = self._execute(run, seen, step)
            if settled is not None:
                return settled
        raise RetryLaterError(f"no steady state after {MAX_STEPS_PER_PASS} steps")

    def _look(self, run: _Pass) -> _Seen:
        """What the plan is asked with: the job's status as last written, the driver
        object and the pods; and the driver's settings and object as they would be
        submitted now, with the sink's recorded previous prefix."""
        job, status = run.job, self.statuses.read(run.obj)
        namespace, name = job.metadata.namespace, job.metadata.name
        kafka = job.spec.sink.kafka
        recorded, wanted, settings = None, None, run.settings
        if kafka is not None:
            recorded = recorded_sink(status, self._legacy_prefix(job, status, run.pipeline))
            wanted = SinkProducers(run.pipeline.transactional_id_prefix, kafka.partitions)
            previous = recorded.previous_prefix if recorded else None
            settings = settings.model_copy(update={"previous_transactional_id_prefix": previous})
        desired = run.submission.render(job, settings, self.image, self.spark_version)
        pods = self.kube.list_pods(namespace, f"{LABEL_SPARKJOB}={name}")
        application = run.application
        observation = SparkObservation(
            job=name,
            desired=SparkDesired(
                state=effective_state(run.pipeline.spec.state, job.spec.state),
                spec=_spec_hash(desired),
                producers=wanted,
                sink=job.spec.sink,
                topics=tuple(settings.topics),
                input_reset=job.spec.input_reset,
                available_now=job.spec.trigger.available_now,
            ),
            record=SparkRecord(
                state=status.state,
                stop_fenced=bool(status.stop_fenced),
                producers=recorded,
                input_reset=status.input_reset,
                fence_wait_s=fence_failures(status).wait_s(time.time()),
            ),
            running=SparkRunning(
                driver=(
                    None
                    if application is None
                    else DriverSeen(_spec_hash(application), run.submission.state(application))
                ),
                pods=bool(pods),
                other_submission=run.other_submitter is not None,
                settings_written=run.settings_written,
                previous_gone=run.previous_gone,
            ),
        )
        return _Seen(status, settings, desired, pods, observation)

    def _execute(self, run: _Pass, seen: _Seen, step: SettlingStep) -> bool | None:
        """Runs a step of the input reset, the state or the sink handover; answers
        whether the job settled when the pass ends here (None: it goes on). A step
        that waits raises RetryLater."""
        job, status = run.job, seen.status
        if isinstance(step, RecordInputReset):
            run.obj = self._record_input_reset(run.obj, status, step.outcome)
        elif isinstance(step, RecordState):
            reason, message = SPARK_STATE_CHANGES[step.state]
            status = status.model_copy(update={"state": step.state, "stop_fenced": False})
            run.obj = self._write(run.obj, status, False, reason, message)
            self.kube.event(run.obj, reason, message)
        elif isinstance(step, RemoveDriver):
            self._delete(run.submission, job)
            state = seen.observation.desired.state
            message = f"{state}: the driver is being removed; the checkpoint stays"
            self._write(run.obj, status, False, "RemovingDriver", message)
            raise RetryLaterError(message)
        elif isinstance(step, WaitPodsGone):
            self._wait_until_previous_pods_are_gone(run.obj, job, status)
        elif isinstance(step, FenceSinkIds):
            run.obj = self._fence_held(run.obj, run.pipeline, status, step.ids)
        elif isinstance(step, HeldStill):
            self._write_held(run, seen)
            return True
        elif isinstance(step, BackOff):
            raise waiting_for_backoff(fence_failures(status), _blocked(step.fence), step.delay_s)
        elif isinstance(step, SwitchSubmitter):
            self._switch_submitter(run, status)
        else:
            run.obj = self._hand_over_sink(run, status, step)
        return None

    def _drive(self, run: _Pass, seen: _Seen, step: DriverStep) -> bool | None:
        """Runs a step once the sink is settled: writes what keeps, replaces or starts
        the driver, with the status naming the sink's producers."""
        job, kind, mode = run.job, seen.desired["kind"], run.mode
        status = with_fence_failures(
            seen.status if step.sink is None else with_sink(seen.status, step.sink), None
        )
        if isinstance(step, WriteSettings):
            self.kube.put_configmap(job_configmap(job, seen.settings))
            run.settings_written = True
        elif isinstance(step, Restart):
            # Replace by delete-then-create: the new object starts with no status, so an
            # old RUNNING state can never be mistaken for the new mode running.
            self._delete(run.submission, job)
            message = f"restarting the {kind} for mode {mode}"
            self._write(run.obj, status, False, "Restarting", message)
            raise RetryLaterError(message)
        elif isinstance(step, WaitPreviousDriver):
            self._wait_until_previous_pods_are_gone(run.obj, job, status)
            run.previous_gone = True
        elif isinstance(step, Submit):
            run.application = self._create(run.submission, seen.desired)
            self.kube.event(run.obj, "ApplicationSubmitted", f"{kind} for mode {mode}")
        elif isinstance(step, DriverExited):
            # A streaming query runs until stopped, so its driver exited (a graceful stop,
            # which spark-submit's Job takes as done): its checkpoint resumes it.
            self._delete(run.submission, job)
            message = f"the {kind}'s driver exited; restarting it from its checkpoint"
            self.kube.event(run.obj, "DriverExited", message, warning=True)
            self._write(run.obj, status, False, "Restarting", message)
            raise RetryLaterError(message)
        else:
            assert isinstance(step, Keep)
            return self._report(run, seen, status)
        return None

    def _report(self, run: _Pass, seen: _Seen, status: SparkJobStatus) -> bool:
        """Writes the driver's state; answers whether the job settled (its driver
        running or, for an availableNow run, completed)."""
        assert run.application is not None, "kept only while a driver object exists"
        kind, mode, pods = seen.desired["kind"], run.mode, seen.pods
        state = run.submission.state(run.application)
        running = state == "RUNNING"
        # An availableNow run that drained its input and stopped ran in this mode too.
        completed = state == COMPLETED
        status = status.model_copy(
            update={
                "application_state": state,
                "observed_mode": mode if running or completed else status.observed_mode,
                "progress": driver_progress(pods) or status.progress,
            }
        )
        failed = state in ("FAILED", "SUBMISSION_FAILED")
        message = f"{kind} {state or 'submitted'} (mode {mode})"
        reason = {"RUNNING": "Running", COMPLETED: "Completed"}.get(
            state or "", "ApplicationFailed" if failed else "Starting"
        )
        # A driver that keeps exiting, an executor no node takes: the application may
        # still read RUNNING or SUBMITTED, and only the pods know.
        trouble = None if completed else pods_problem(pods, datetime.now(UTC))
        if trouble is None and not completed and not pods:
            trouble = creation_refused(
                f"{kind} {run.application['metadata']['name']}",
                self.kube.events_of(run.application),
            )
        if trouble is not None:
            self._write(run.obj, status, False, trouble.reason, trouble.message, degraded=True)
            return False
        self._write(run.obj, status, running or completed, reason, message, degraded=failed)
        return running or completed

    def _write_held(self, run: _Pass, seen: _Seen) -> None:
        # Nothing runs, so no mode is broken: it resumes in the Pipeline's.
        held = seen.status.model_copy(update={"observed_mode": run.mode, "application_state": None})
        desired = seen.observation.desired.state
        reason = "Stopped" if desired is WorkloadState.STOPPED else "Paused"
        message = (
            f"{desired}: no driver runs, the checkpoint is kept and the sink's "
            "transactional ids are fenced; set spec.state: running to resume"
        )
        self._write(run.obj, held, True, reason, message)

    def _record_input_reset(
        self, obj: Obj, status: SparkJobStatus, outcome: InputResetStatus
    ) -> Obj:
        """Records what becomes of a new spec.inputReset (``logic.input_reset``), with an
        event: the driver reads the reset in force from status from then on."""
        obj = self.statuses.write(obj, status.model_copy(update={"input_reset": outcome}))
        refused = outcome.result is InputResetResult.REFUSED
        reason = "InputResetRefused" if refused else "InputReset"
        self.kube.event(obj, reason, f"{outcome.id}: {outcome.message}", warning=refused)
        return obj

    def _fence_held(
        self, obj: Obj, pipeline: Pipeline, status: SparkJobStatus, ids: tuple[str, ...]
    ) -> Obj:
        if ids:
            self._fence_sink(obj, pipeline, status, ids, HELD_UNTIL_FENCED)
        fenced = with_fence_failures(status, None).model_copy(update={"stop_fenced": True})
        return self._write(obj, fenced, False, "SinkFenced", "the sink's ids are fenced")

    def _create(self, submission: Submission, desired: Obj) -> Obj:
        try:
            return self.kube.create_foreign(submission.plural, desired)
        except ApiException as error:
            if error.status != HTTP_NOT_FOUND or submission.plural != "sparkapplications":
                raise
            raise InvalidWorkloadError(
                "SparkOperatorMissing",
                f"spec.submitter: spark-operator needs the SparkApplication CRD "
                f"({submission.api_version}), which this cluster does not serve; install "
                "the Spark operator or set spec.submitter: spark-submit",
            ) from None

    def _wait_until_previous_pods_are_gone(
        self, obj: Obj, job: SparkJob, status: SparkJobStatus
    ) -> None:
        """A replaced driver is gone when its pods are, not when its object is: until
        then it (and its executors, which do the reading) may still consume with the old
        isolation next to its successor, or share its checkpoint. The same holds for
        another job's pods on this checkpoint: a job renamed in one step (the old
        SparkJob deleted, the new one created) would otherwise start while the old
        driver still finishes a batch that both would then write. Without a garbage
        collector doing it, the leftovers of this job and of jobs no longer stored are
        deleted here too."""
        namespace, name = job.metadata.namespace, job.metadata.name
        mine = self.kube.list_pods(namespace, f"{LABEL_SPARKJOB}={name}")
        others = self._others_on_checkpoint(job)
        pods = [*mine, *others]
        if not pods:
            return
        for pod in pods:
            if not pod["metadata"].get("deletionTimestamp"):
                self.kube.delete_pod(
                    pod["metadata"]["namespace"], pod["metadata"]["name"], SPARK_POD_GRACE_S
                )
        # Pods of another namespace are counted, never named.
        names = [p["metadata"]["name"] for p in pods if p["metadata"]["namespace"] == namespace]
        elsewhere = len(pods) - len(names)
        listed = ", ".join(sorted(names) + ([f"{elsewhere} elsewhere"] if elsewhere else []))
        whose = "the previous driver" if not others else "a deleted job's driver on this checkpoint"
        message = f"waiting for pod(s) {listed} of {whose} to be gone"
        self._write(obj, status, False, "WaitingForPreviousDriver", message)
        raise RetryLaterError(message)

    def _others_on_checkpoint(self, job: SparkJob) -> list[Obj]:
        """Pods of jobs no longer stored that worked on this job's checkpoint. A stored
        job on the same checkpoint is a conflict the pipeline graph refuses (two jobs
        sharing one from before that rule): Degraded, never a wait without end. A pod
        whose labels claim this checkpoint for a job that is stored elsewhere, or for
        none, is not believed: labels are not proof. A path of the pod's own disk is
        no one else's."""
        place = place_of(job)
        if place.local:
            return []
        # A claim is a place of its namespace; a URI one of every namespace (a job moved
        # to another namespace keeps its checkpoint).
        where = job.metadata.namespace if job.spec.checkpoint.pvc else ALL_NAMESPACES
        me = (job.metadata.namespace, job.metadata.name)
        selector = f"{LABEL_CHECKPOINT}={spark_pod_labels(job)[LABEL_CHECKPOINT]}"
        leftovers = []
        for pod in self.kube.list_pods(where, selector):
            owner = _job_of(pod)
            if owner == me or not owner[1]:
                continue
            stored = self.kube.get(PLURAL, *owner)
            if stored is None:
                leftovers.append(pod)
                continue
            try:
                theirs = SparkJob.model_validate(stored)
            except ValueError:
                continue
            if place_of(theirs) == place:
                raise InvalidWorkloadError(
                    CHECKPOINT_CONFLICT,
                    "spec.checkpoint: a driver of another SparkJob "
                    + (f"({owner[1]!r}) " if owner[0] == me[0] else "of another namespace ")
                    + "runs on this checkpoint; give each job a checkpoint of its own",
                )
        return leftovers

    def _get(self, submission: Submission, job: SparkJob) -> Obj | None:
        """The job's driver object of this submitter; every replace and delete of it
        starts here, so one of that name that is not the job's stops the pass."""
        found = self._find(submission, job)
        if found is not None:
            refuse_unless_ours(found, job.kind, job.metadata.name)
        return found

    def _find(self, submission: Submission, job: SparkJob) -> Obj | None:
        return self.kube.get_foreign(
            submission.api_version,
            submission.plural,
            job.metadata.namespace,
            submission.object_name(job.metadata.name),
        )

    def _delete(self, submission: Submission, job: SparkJob) -> None:
        self.kube.delete_foreign(
            submission.api_version,
            submission.plural,
            job.metadata.namespace,
            submission.object_name(job.metadata.name),
            propagation=submission.propagation,
        )

    def _other_submitter(self, job: SparkJob) -> Submitter | None:
        """The other ``spec.submitter`` whose driver object of the job exists: a
        changed submitter stops the old driver before the new one starts. Another
        submitter's object of the job's name that is not the job's is none of its
        business (another team's SparkApplication): it is left alone."""
        for submitter, other in SUBMISSIONS.items():
            if submitter is job.spec.submitter:
                continue
            found = self._find(other, job)
            if found is not None and is_ours(found, job.kind, job.metadata.name):
                return submitter
        return None

    def _switch_submitter(self, run: _Pass, status: SparkJobStatus) -> None:
        other = run.other_submitter
        assert other is not None, "switched only from a submitter whose driver exists"
        self._delete(SUBMISSIONS[other], run.job)
        message = f"switching to {run.job.spec.submitter}: waiting for the {other} driver"
        self._write(run.obj, status, False, "SwitchingSubmitter", message)
        raise RetryLaterError(message)

    def _legacy_prefix(self, job: SparkJob, status: SparkJobStatus, pipeline: Pipeline) -> str:
        """The prefix a status without one was using: what the running driver was told
        (its ConfigMap), which a rename in the same breath as the upgrade has not
        changed yet; else the pipeline's."""
        if status.sink_transactional_id_prefix or not status.sink_partitions:
            return pipeline.transactional_id_prefix
        data = self.kube.configmap_data(
            job.metadata.namespace, job_configmap_name(job.metadata.name)
        )
        told = json.loads((data or {}).get("job.json") or "{}").get("transactionalIdPrefix")
        return str(told or pipeline.transactional_id_prefix)

    def _hand_over_sink(
        self, run: _Pass, status: SparkJobStatus, step: RecordSink | StopDriver | FenceSink
    ) -> Obj:
        """Runs a step of the sink handover (``logic.sink_handover``); raises RetryLater
        while the old driver stops or fencing fails."""
        if isinstance(step, RecordSink):
            # Written before any driver starts: a driver running without a record would
            # be stopped by the next pass as one whose producers are unknown.
            status = with_fence_failures(with_sink(status, step.producers), None)
            producers = step.producers
            message = (
                f"sink producers recorded: prefix {producers.prefix!r}, "
                f"{producers.partitions} partition(s)"
            )
            return self._write(run.obj, status, False, "SinkRecorded", message)
        if isinstance(step, StopDriver):
            self._delete(run.submission, run.job)
            self._write(run.obj, status, False, "HandingOverSink", step.reason)
            raise RetryLaterError(step.reason)
        self._fence_sink(run.obj, run.pipeline, status, step.ids, STOPPED_UNTIL_FENCED)
        status = with_sink(with_fence_failures(status, None), step.then)
        return self._write(
            run.obj, status, False, "SinkHandedOver", f"{step.reason}; old ids fenced"
        )

    def _fence_sink(
        self,
        obj: Obj,
        pipeline: Pipeline,
        status: SparkJobStatus,
        ids: tuple[str, ...],
        blocked: str,
    ) -> None:
        """Fences the sink's ``ids`` within the backoff the job's status records (a hand
        over and a stop alike); raises RetryLater while it fails."""
        extra = pipeline_client_settings(self.kube, pipeline, self.policy.extra_secret_keys)
        report = fence_with_backoff(
            lambda: self.fence(
                pipeline.spec.kafka.bootstrap_servers,
                list(ids),
                extra=extra,
                timeout_s=self.fence_timeout_s,
            ),
            fence_failures(status),
            lambda message, failures: self._write(
                obj,
                with_fence_failures(status, failures),
                False,
                "FencingFailed",
                message,
                degraded=True,
            ),
            blocked,
            "SparkJob",
        )
        self.kube.event(obj, "SinkFenced", f"{report.summary()}: {', '.join(ids)}")


def _job_of(pod: Obj) -> tuple[str, str]:
    """The (namespace, name) of the SparkJob a pod belongs to."""
    meta = pod["metadata"]
    return meta["namespace"], str((meta.get("labels") or {}).get(LABEL_SPARKJOB, ""))


def recorded_sink(status: SparkJobStatus, legacy_prefix: str) -> SinkProducers | None:
    """The producers the status records (``legacy_prefix`` for a status from before
    prefixes were recorded)."""
    if not status.sink_partitions:
        return None
    return SinkProducers(
        status.sink_transactional_id_prefix or legacy_prefix,
        status.sink_partitions,
        status.previous_sink_transactional_id_prefix,
    )


def with_sink(status: SparkJobStatus, producers: SinkProducers) -> SparkJobStatus:
    return status.model_copy(
        update={
            "sink_partitions": producers.partitions,
            "sink_transactional_id_prefix": producers.prefix,
            "previous_sink_transactional_id_prefix": producers.previous_prefix,
        }
    )
