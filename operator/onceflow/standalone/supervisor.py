"""``onceflow run``: the operator's generation protocol on one machine, no Kubernetes.

For each KafkaSource of the given manifests, in the same order as the operator:
plan the generation from the durable record -> record the intent -> stop the old
task processes (confirmed exited) -> fence the old transactional ids -> record the
fenced generation -> start the new tasks. Manifest edits re-plan while running, and
a restarted ``onceflow run`` finishes whatever step its predecessor was in.

One supervisor per state directory (an exclusive lock), and before it starts anything
it stops the processes a crashed predecessor left running (their pids are recorded).
"""

from __future__ import annotations

import base64
import fcntl
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from onceflow.api import InvalidResourceError, Resource, parse_resources
from onceflow.api.errors import Problem, labelled
from onceflow.api.manifests import MANIFESTS, ResourceRef, is_core_object
from onceflow.api.task import FileAuthority
from onceflow.connectors.checks import CHECK_DEADLINE_S, source_system_problems, within
from onceflow.connectors.registry import load_connector
from onceflow.eos.broker_check import broker_problems
from onceflow.eos.fencing import fence_transactional_ids
from onceflow.eos.offset_changes import judged_change, write_offsets_change
from onceflow.eos.offsets import OffsetsTopicError, carry_offsets
from onceflow.eos.writer import WRITE_FAILURES
from onceflow.logic.fence_backoff import FenceFailures
from onceflow.logic.generations import GenerationRecord
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
    Worker,
    WriteOffsets,
    next_step,
)
from onceflow.logic.resolve import IN_MANIFESTS, resolve_source
from onceflow.logic.resource_set import ResourceSet
from onceflow.logic.source_status import STATE_CHANGES
from onceflow.logic.tenant_policy import DEFAULT_POLICY, TenantPolicy, policy_from
from onceflow.logic.topic_ownership import manifest_problems
from onceflow.manifest_files import ManifestFileError, ManifestSources
from onceflow.model.names import legacy_task_transactional_ids
from onceflow.model.tasks import DesiredTasks
from onceflow.standalone.children import ChildProcess, stop_recorded_orphans
from onceflow.standalone.spark_jobs import PlannedSparkJob, SparkJobSupervisor, plan_spark_job
from onceflow.standalone.state import load_record, state_path, store_record, write_json_atomically

OFFSETS_WRITE_FAILURES: tuple[type[Exception], ...] = (*WRITE_FAILURES, OffsetsTopicError)

log = logging.getLogger(__name__)

# How often the loop looks at manifests and children: fast enough that a SIGKILLed
# task restarts within a second, slow enough to be invisible in CPU use.
TICK_S = 0.25
PROGRESS_EVERY_S = 2.0
# Tasks read their state file this often between transactions: a local file costs
# nothing to read, and a pause should take hold as soon as one asks for it.
STATE_LOOK_MS = 250


class StateDirLockedError(Exception):
    """Another ``onceflow run`` holds the state directory."""


@dataclass(frozen=True)
class Manifests:
    resources: list[Resource]
    """Pipelines, KafkaSources and SparkJobs in file order, duplicates and all (the
    topic-ownership check refuses those)."""
    secrets: dict[str, dict[str, str]]
    """v1 Secrets in the same files (a Postgres sink's DSN): there is no API server to
    hold them, and users keep them next to the workloads that mount them anyway."""
    config_maps: dict[str, dict[str, str]]
    """v1 ConfigMaps in the same files (a transform's Python files), for the same
    reason."""

    @property
    def found(self) -> ResourceSet:
        return ResourceSet.of(self.resources)


def _is_secret(document: dict[str, Any]) -> bool:
    return document.get("apiVersion") == "v1" and document.get("kind") == "Secret"


def _is_config_map(document: dict[str, Any]) -> bool:
    return document.get("apiVersion") == "v1" and document.get("kind") == "ConfigMap"


def _secret_data(document: dict[str, Any]) -> dict[str, str]:
    data = {k: base64.b64decode(v).decode() for k, v in (document.get("data") or {}).items()}
    data.update(document.get("stringData") or {})
    return data


def load_manifests(documents: Sequence[dict[str, Any]]) -> Manifests:
    resources = parse_resources(d for d in documents if d and not is_core_object(d))
    return Manifests(
        resources=resources,
        secrets={d["metadata"]["name"]: _secret_data(d) for d in documents if _is_secret(d)},
        config_maps={
            d["metadata"]["name"]: dict(d.get("data") or {}) for d in documents if _is_config_map(d)
        },
    )


@dataclass(frozen=True)
class RunPlan:
    sources: list[DesiredTasks]
    spark_jobs: list[PlannedSparkJob]
    secrets: Mapping[str, Mapping[str, str]] = field(default_factory=dict)


def plan_run(
    documents: Sequence[dict[str, Any]],
    bootstrap_override: str | None,
    state_dir: Path,
    policy: TenantPolicy = DEFAULT_POLICY,
) -> RunPlan:
    """Validates every workload before anything starts; all problems in one error.
    ``policy``: what the operator would refuse (Onceflow's own Spark settings, loaded
    code), refused here too, so a pipeline tried with ``run`` is one the cluster takes."""
    manifests = load_manifests(documents)
    found = manifests.found
    planned: list[DesiredTasks] = []
    problems: list[Problem] = [
        problem
        for resource in manifests.resources
        for problem in labelled(ResourceRef.of(resource).label, policy.resource_problems(resource))
    ]
    for source in found.sources.values():
        label = ResourceRef.of(source).label
        desired = resolve_source(
            source,
            found.pipeline_of(source),
            load_connector,
            where=IN_MANIFESTS,
            bootstrap_override=bootstrap_override,
            secrets=manifests.secrets,
        )
        if isinstance(desired, list):
            problems += labelled(label, desired)
            continue
        secret_ref = source.spec.connector.secret_ref
        refused = source_system_problems(
            source.spec,
            manifests.secrets.get(secret_ref.name, {}) if secret_ref else {},
            shares_task_filesystem=True,
        )
        if refused:
            problems += labelled(label, refused)
        else:
            planned.append(desired)
    jobs: list[PlannedSparkJob] = []
    for job in found.spark_jobs.values():
        planned_job = plan_spark_job(
            job,
            found.pipeline_of(job),
            found.source_topics(job),
            manifests.secrets,
            manifests.config_maps,
            bootstrap_override=bootstrap_override,
            state_dir=state_dir,
        )
        if isinstance(planned_job, list):
            problems += labelled(ResourceRef.of(job).label, planned_job)
        else:
            jobs.append(planned_job)
    problems += manifest_problems(
        manifests.resources, connectors=load_connector, bootstrap_override=bootstrap_override
    )
    if problems:
        raise InvalidResourceError(MANIFESTS, problems)
    if not planned and not jobs:
        raise InvalidResourceError(MANIFESTS, [Problem("", "no KafkaSource or SparkJob to run")])
    return RunPlan(planned, jobs, manifests.secrets)


ClientExtras = tuple[tuple[str, str], ...]
"""librdkafka settings beyond the bootstrap, hashable to tell brokers apart."""


def brokers_problems(plan: RunPlan) -> list[Problem]:
    """Each distinct Kafka of the plan asked once before anything starts; a refusal is
    reported against the first workload that uses it."""
    brokers: dict[tuple[str, ClientExtras], str] = {}
    for desired in plan.sources:
        brokers.setdefault((desired.bootstrap_servers, ()), ResourceRef.of(desired.pipeline).label)
    for job in plan.spark_jobs:
        settings = job.settings
        extra: ClientExtras = tuple(sorted(settings.kafka_config.items()))
        brokers.setdefault(
            (settings.bootstrap_servers, extra), f"SparkJob {settings.namespace}/{settings.job}"
        )
    return [
        problem
        for (bootstrap, extra), label in brokers.items()
        for problem in labelled(label, broker_problems(bootstrap, dict(extra)))
    ]


@dataclass
class SourceSupervisor:
    """Runs one source's generations through the generation protocol, with the state
    file as the record and child processes as the workers."""

    desired: DesiredTasks
    state_dir: Path
    say: Callable[[str], None]
    tasks: dict[int, ChildProcess] = field(default_factory=dict)
    running_generation: int = 0
    failures: FenceFailures = field(default_factory=FenceFailures)
    secrets: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """The manifests' Secrets; the connector's is written for its tasks at each start."""

    @property
    def name(self) -> str:
        return self.desired.source.metadata.name

    @property
    def state_file(self) -> Path:
        return state_path(self.state_dir, self.desired.source.metadata.namespace, self.name)

    @property
    def record(self) -> GenerationRecord | None:
        prefix = self.desired.pipeline.transactional_id_prefix
        return load_record(
            self.state_file,
            lambda count: legacy_task_transactional_ids(prefix, self.name, count),
            self.desired.offsets_topic,
        )

    def _workers(self) -> tuple[Worker, ...]:
        return tuple(
            Worker(f"g{self.running_generation} task {task}", self.running_generation, task)
            for task in self.tasks
        )

    def reconcile(self, now: float) -> None:
        # Bounded like the operator's pass: intent, stop, fence, start, keep.
        for _ in range(8):
            record = self.record
            step = next_step(
                record, self.desired.generation, Observed(self._workers()), self.failures, now
            )
            if isinstance(step, (WaitGone, BackOff)):
                return
            if isinstance(step, Keep):
                self._supervise(now)
                return
            if not self._execute(step, record):
                return

    def _execute(self, step: Step, record: GenerationRecord | None) -> bool:
        """Runs one step; False when the pass must end here (fencing failed)."""
        if isinstance(step, RecordIntent):
            store_record(self.state_file, step.record)
            if record is not None and record.state is not step.record.state:
                self.say(f"{self.name}: {STATE_CHANGES[step.record.state][1]}")
            elif record is not None and record.offsets_change != step.record.offsets_change:
                self._say_offsets_change(step.record)
            elif record is not None and record.generation != step.record.generation:
                self.say(
                    f"{self.name}: generation {step.record.generation} planned "
                    f"({len(record.ids)} -> {step.record.task_count} tasks, mode "
                    f"{step.record.mode}); stopping generation {record.generation}"
                )
        elif isinstance(step, Stop):
            self.stop_tasks()  # every worker of ours is named in a Stop, or none
        elif isinstance(step, Fence):
            return self._fence(step)
        elif isinstance(step, CheckOffsets):
            return self._check_offsets(step)
        elif isinstance(step, WriteOffsets):
            return self._write_offsets(step)
        elif isinstance(step, Start):
            assert record is not None
            self._start(record, step.tasks)
        return True

    def _fence(self, step: Fence) -> bool:
        bootstrap = self.desired.bootstrap_servers
        if step.ids:
            report = fence_transactional_ids(bootstrap, step.ids, timeout_s=30)
            if not report.ok:
                self.failures = self.failures.after_failure(time.monotonic())
                delay = self.failures.retry_at - time.monotonic()
                self.say(f"{self.name}: {report.summary()}; retrying in {delay:.0f}s")
                return False
            self.say(f"{self.name}: {report.summary()}: {', '.join(step.ids)}")
        self.failures = FenceFailures()
        if step.carry_offsets is not None:
            old, new = step.carry_offsets
            namespace = self.desired.source.metadata.namespace
            copied = carry_offsets(
                bootstrap, old, new, f"{namespace}/{self.name}", legacy_owner=self.name
            )
            self.say(f"{self.name}: carried {copied} offset(s) from {old} to {new}")
        store_record(self.state_file, step.then)
        # Said once recorded: a user (or a script) acting on it finds the stop in the
        # state file, and a change of offsets made now is checked against it.
        if step.then.stop_fenced and not step.then.fencing_pending:
            self.say(f"{self.name}: stopped; offsets kept (change them now, or resume)")
        return True

    def _check_offsets(self, step: CheckOffsets) -> bool:
        """False when Kafka or the source system could not answer: asked again on a
        later pass (a refusal is for good, and an outage is not the change's fault)."""
        source = self.desired.source
        ref = source.spec.connector.secret_ref
        try:
            outcome = judged_change(
                step,
                load_connector(source.spec.connector.type),
                source.spec.connector.config,
                dict(self.secrets.get(ref.name, {})) if ref else {},
                partial(within, CHECK_DEADLINE_S),
                bootstrap=self.desired.bootstrap_servers,
                owner=f"{source.metadata.namespace}/{self.name}",
                legacy_owner=self.name,
            )
        except Exception as error:  # Kafka's, a source system's or a connector's failure
            self.say(
                f"{self.name}: offsets change {step.request.id} not checked yet ({error}); "
                "asking again"
            )
            return False
        self._store_offsets_change(step.record.with_offsets_change(outcome))
        return True

    def _write_offsets(self, step: WriteOffsets) -> bool:
        """False when the write failed: the change stays Applying and is written again
        on a later pass (the run goes on; nothing of the source moves meanwhile)."""
        source = self.desired.source
        try:
            record = write_offsets_change(
                step,
                bootstrap=self.desired.bootstrap_servers,
                namespace=source.metadata.namespace,
                source=self.name,
                prefix=self.desired.pipeline.transactional_id_prefix,
            )
        except OFFSETS_WRITE_FAILURES as error:
            change = step.record.offsets_change
            assert change is not None
            self.say(f"{self.name}: offsets change {change.id} not written yet ({error}); retrying")
            return False
        self._store_offsets_change(record)
        return True

    def _store_offsets_change(self, record: GenerationRecord) -> None:
        store_record(self.state_file, record)
        self._say_offsets_change(record)

    def _say_offsets_change(self, record: GenerationRecord) -> None:
        outcome = record.offsets_change
        assert outcome is not None
        verdict = outcome.result.value.lower()
        self.say(f"{self.name}: offsets change {outcome.id} {verdict}: {outcome.message}")

    def _start(self, record: GenerationRecord, task_ids: Sequence[int]) -> None:
        authority = FileAuthority(path=str(self.state_file.resolve()))
        stem = self.state_file.with_suffix("")
        update: dict[str, object] = {"state_look_ms": STATE_LOOK_MS}
        secret_dir = self._write_connector_secret(stem, record.generation)
        if secret_dir is not None:
            update["connector_secret_dir"] = str(secret_dir)
        settings = [
            s.model_copy(update=update)
            for s in self.desired.settings(
                record.generation, authority, incarnation=record.incarnation
            )
        ]
        self.running_generation = record.generation
        for task_id in task_ids:
            path = Path(f"{stem}.g{record.generation}-{task_id}.json")
            write_json_atomically(path, settings[task_id].to_wire())
            task = ChildProcess(
                f"task {task_id}",
                "task",
                path,
                Path(f"{stem}.task-{task_id}.log"),
                restart_after_clean_exit=True,
            )
            self.tasks[task_id] = task
            task.supervise(time.monotonic())
        self.say(
            f"{self.name}: generation {record.generation} running {len(self.tasks)} task(s) "
            f"in mode {record.mode}"
        )
        self._write_pids()

    def _write_connector_secret(self, stem: Path, generation: int) -> Path | None:
        """The connector's Secret as a pod would mount it (a file per key), readable by
        this user only: credentials never go into the settings files. One directory
        per generation, made whole before it appears (a task restarting meanwhile
        reads it complete), and the older generations' removed."""
        ref = self.desired.source.spec.connector.secret_ref
        if ref is None:
            return None
        directory = Path(f"{stem}.g{generation}.connector-secret")
        for earlier in stem.parent.glob(f"{stem.name}.g*.connector-secret"):
            if earlier != directory:
                shutil.rmtree(earlier, ignore_errors=True)
        if directory.exists():
            return directory
        staging = Path(tempfile.mkdtemp(prefix=f"{stem.name}.", dir=stem.parent))  # 0700
        for key, value in self.secrets[ref.name].items():
            path = staging / key
            path.touch(mode=0o600)
            path.write_text(value)
        staging.rename(directory)
        return directory

    def _supervise(self, now: float) -> None:
        changed = False
        for task in self.tasks.values():
            line = task.supervise(now)
            if line:
                changed = True
                self.say(f"{self.name} g{self.running_generation}: {line}")
        if changed:
            self._write_pids()

    def _write_pids(self) -> None:
        pids = {str(t): p.pid for t, p in self.tasks.items() if p.pid}
        write_json_atomically(self.state_file.with_suffix(".pids.json"), pids)

    def stop_tasks(self) -> None:
        for task in self.tasks.values():
            task.stop()
        self.tasks = {}
        stem = self.state_file.with_suffix("")
        for written in stem.parent.glob(f"{stem.name}.g*.connector-secret"):
            shutil.rmtree(written, ignore_errors=True)

    def progress_lines(self, elapsed_s: float, before: dict[int, int]) -> list[str]:
        """One line per task, or none when nothing was committed since last time."""
        if all(
            int(t.last_progress.get("records", 0)) == before.get(i, 0)
            for i, t in self.tasks.items()
        ):
            return []
        lines = []
        for task_id, task in sorted(self.tasks.items()):
            event = task.last_progress
            records = int(event.get("records", 0))
            rate = (records - before.get(task_id, 0)) / elapsed_s if elapsed_s else 0.0
            before[task_id] = records
            offsets = " ".join(f"{k}={v}" for k, v in sorted((event.get("offsets") or {}).items()))
            lines.append(
                f"  {self.name} task {task_id} pid {task.pid or '-'}: {records} committed "
                f"({rate:.0f}/s), restarts {task.restarts}, offsets {offsets or '-'}"
            )
        return lines


class Supervisor:
    """Runs every source and SparkJob of the manifests until stopped; re-plans on edits."""

    def __init__(
        self,
        sources: ManifestSources,
        *,
        bootstrap: str | None,
        state_dir: Path,
        say: Callable[[str], None] = print,
        progress: bool = True,
    ) -> None:
        self.manifests = sources
        self.bootstrap = bootstrap
        self.state_dir = state_dir
        self.say = say
        self.progress = progress
        self.sources: dict[str, SourceSupervisor] = {}
        self.spark_jobs: dict[str, SparkJobSupervisor] = {}
        self._mtimes = self._manifest_mtimes()

    def _manifest_mtimes(self) -> tuple[int, ...]:
        try:
            return self.manifests.stamps()
        except ManifestFileError:
            return ()  # a file or directory went: the re-plan says so

    def _plan(self) -> RunPlan:
        # The operator's policy, from the variables the chart would set on it.
        policy = policy_from(os.environ)
        return plan_run(self.manifests.documents(), self.bootstrap, self.state_dir, policy)

    def _apply(self, plan: RunPlan) -> None:
        names = set()
        for desired in plan.sources:
            key = f"{desired.source.metadata.namespace}/{desired.source.metadata.name}"
            names.add(key)
            if key not in self.sources:
                self.sources[key] = SourceSupervisor(desired, self.state_dir, self.say)
            self.sources[key].desired = desired
            self.sources[key].secrets = plan.secrets
        for key in set(self.sources) - names:
            self.say(f"{key}: removed from the manifests; stopping its tasks")
            self.sources.pop(key).stop_tasks()
        jobs = {f"{j.settings.namespace}/{j.settings.job}": j for j in plan.spark_jobs}
        for key, job in jobs.items():
            if key in self.spark_jobs:
                self.spark_jobs[key].planned = job
            else:
                self.spark_jobs[key] = SparkJobSupervisor(job, self.state_dir, self.say)
        for key in set(self.spark_jobs) - set(jobs):
            self.say(f"{key}: removed from the manifests; stopping its driver")
            self.spark_jobs.pop(key).stop()

    def _lock_state_dir(self) -> Any:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        lock = (self.state_dir / "run.lock").open("a+")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            raise StateDirLockedError(
                f"another onceflow run is using the state directory {self.state_dir}; stop"
                " it first (two supervisors would run every task twice)"
            ) from None
        return lock

    def run(self, stop: threading.Event) -> None:
        plan = self._plan()
        if refused := brokers_problems(plan):
            raise InvalidResourceError(MANIFESTS, refused)
        lock = self._lock_state_dir()
        try:
            for pids_file in sorted(self.state_dir.glob("*.pids.json")):
                stop_recorded_orphans(pids_file, self.say)
            self._run(plan, stop)
        finally:
            lock.close()

    def _run(self, plan: RunPlan, stop: threading.Event) -> None:
        self._apply(plan)
        last_progress = time.monotonic()
        counts: dict[str, dict[int, int]] = {}
        try:
            while not stop.is_set():
                now = time.monotonic()
                self._reload_if_changed()
                # Consumers first on the way up (a driver still reading uncommitted must be
                # gone before any producer goes transactional), producers first on the way
                # down (they leave transactions before consumers stop reading committed).
                consumers_first = [j for j in self.spark_jobs.values() if j.raises_isolation]
                for job in consumers_first:
                    job.reconcile(now)
                for source in self.sources.values():
                    source.reconcile(now)
                for job in self.spark_jobs.values():
                    if job not in consumers_first:
                        job.reconcile(now)
                if self.progress and now - last_progress >= PROGRESS_EVERY_S:
                    for key, source in self.sources.items():
                        for line in source.progress_lines(
                            now - last_progress, counts.setdefault(key, {})
                        ):
                            self.say(line)
                    last_progress = now
                stop.wait(TICK_S)
        finally:
            for job in self.spark_jobs.values():
                job.stop()
            for source in self.sources.values():
                source.stop_tasks()
            self.say("all tasks and drivers stopped")

    def _reload_if_changed(self) -> None:
        mtimes = self._manifest_mtimes()
        if mtimes == self._mtimes:
            return
        self._mtimes = mtimes
        try:
            self._apply(self._plan())
            self.say("manifests changed: re-planned")
        except (InvalidResourceError, ManifestFileError) as error:
            # Keep running the last good plan: a bad edit must not stop a pipeline.
            self.say(f"manifests changed but are invalid, keeping the running plan: {error}")
