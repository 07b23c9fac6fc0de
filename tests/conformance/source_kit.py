"""The source conformance kit: the run a source connector must pass to be called
exactly-once, whatever its source system.

A connector under test is described by a ``SourceSubject``: its config, a load that
changes its source system while faults land, and an audit comparing what Kafka holds
``read_committed`` with what the source system holds (the subject's ground truth).
``run_source_kit`` runs the connector's real task processes (``onceflow task``)
through SIGKILLs at random moments, SIGKILLs of every task while a transaction is
open, the subject's own faults, and halfway a restart under a new generation (stop,
fence, start, as the supervisor does), then returns the audit once the load ended and
Kafka caught up with the source. A connector that first reads what its source already
holds (a snapshot) has every task SIGKILLed inside it too, before the rest.

Faults that miss prove nothing, so the kit proves its own before returning: every
fault landed while the load was still changing the source, every SIGKILL ended a live
task, the output holds aborted records that only a SIGKILL can have left there, a
snapshot was still underway after a SIGKILL, and each of the subject's faults hit at
least once. A run that cannot show all of that
fails, whatever its audit says. Last, on the quiet source, the subject's refusals:
changes the connector cannot deliver exactly, each of which must stop a task with
nothing of it delivered. tests/conformance/README.md tells connector authors
how to write a subject.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, get_args

from onceflow.eos.fencing import fence_transactional_ids
from onceflow.model.names import task_transactional_ids
from onceflow.model.tasks import DesiredTasks
from onceflow.runtime.task import ExitCode
from tests.support.background import BackgroundWork
from tests.support.kafka import TransactionWatch, aborted_records, offsets_written
from tests.support.tasks import (
    TaskProcess,
    generation_settings,
    plan,
    stored_offsets,
    write_generation,
)
from tests.support.waiting import wait_for

MIN_FAULTS = 4
SEED = 618
GAP_S = (0.3, 1.0)
"""The pause before each fault: random moments, in start-up as in steady work."""
OPEN_TRANSACTION_WAIT_S = 8.0
IN_FLIGHT_S = 0.2
"""How long after a freeze (SIGSTOP) what the tasks had sent takes to land."""
FIRST_RECORDS_S = 120.0
SETTLE_S = 300.0
REFUSAL_S = 60.0
SNAPSHOT_KILLS = 2
"""SIGKILLs of every task inside a snapshot, as long as it lasts."""
SNAPSHOT_PAUSE_S = (0.0, 0.3)

KILL_ONE = "sigkill one task"
KILL_ALL = "sigkill every task mid-transaction"
KILL_IN_SNAPSHOT = "sigkill every task inside the snapshot"
GENERATION_CHANGE = "restart under generation 2"


@dataclass(frozen=True)
class KitSize:
    """How hard a run is: ``make test`` runs the defaults, ``make conformance`` more."""

    faults: int
    """Faults per run (SIGKILLs and the subject's own), the generation change aside."""
    records: int
    """The scale of the load; each subject says what it counts (numbers per stream,
    lines per file, rows, changes)."""

    def __post_init__(self) -> None:
        if self.faults < MIN_FAULTS:
            raise ValueError(f"a run needs at least {MIN_FAULTS} faults, not {self.faults}")

    @classmethod
    def from_env(cls) -> KitSize:
        """A quarter of ONCEFLOW_CHAOS_KILLS (default 20, so 5 faults a connector, the
        generation change aside: five connectors share the suite's minutes) and
        ONCEFLOW_CHAOS_RECORDS (default 3000), as the chaos tests size themselves."""
        kills = int(os.environ.get("ONCEFLOW_CHAOS_KILLS", "20"))
        records = int(os.environ.get("ONCEFLOW_CHAOS_RECORDS", "3000"))
        return cls(faults=max(MIN_FAULTS, kills // 4), records=records)

    @property
    def load_s(self) -> float:
        """The least time a subject's load must keep changing its source, paced by its
        pauses. The fault phase fits in it with room to spare: the first records come a
        few seconds after the start, a fault takes about a second (its pause, the kill)
        or, when it must wait for restarted tasks to run again (a SIGKILL of every task
        mid-transaction, a connection to terminate), up to three; the generation change
        a few."""
        return 3 * self.faults + 10


@dataclass(frozen=True)
class KitAudit:
    """Kafka's committed content against the source system's, at one moment."""

    records: int
    """Committed records read from the output topic."""
    problems: list[str] = field(default_factory=list)
    """What can never come right: a record twice, a record the source does not hold,
    one delivered ahead of records before it (lost or reordered). Once the load ended
    and the source stopped changing, a problem must stay one."""
    behind: list[str] = field(default_factory=list)
    """What the source holds that has not been delivered (yet): a loss shows here, as
    what never arrives."""

    @property
    def caught_up(self) -> bool:
        return not self.behind


@dataclass(frozen=True)
class SourceFault:
    """A fault on the source system's side, mixed into the SIGKILLs."""

    name: str
    strike: Callable[[], bool]
    """Breaks the source side once (terminates a connection, restarts the system) and
    says whether it hit something, e.g. pg_terminate_backend found a backend. It may
    wait a few seconds for something to hit: a task restarted a moment ago may not have
    connected yet."""
    ends_tasks: tuple[str, ...] = ()
    """For a connector whose tasks exit on such a fault and count on their restart (as
    a pod's container is restarted): words one of which the log of a task it ended
    shows. The kit restarts such a task, once the fault struck and for
    ENDED_BY_FAULT_S after it, each task at most once per strike; any other exit of a
    task by itself fails the run."""


ENDED_BY_FAULT_S = 60.0
"""How long after a strike a task's exit may still be that strike's doing: a restarted
task that keeps exiting later fails the run rather than being restarted for good."""


@dataclass
class ExpectedExit:
    """A struck fault's leave to end tasks: one exit of each task, saying one of
    ``words``, until ``until`` (monotonic seconds)."""

    words: tuple[str, ...]
    until: float
    restarted: set[int] = field(default_factory=set)

    def explains(self, task: int, said: str) -> bool:
        return (
            time.monotonic() < self.until
            and task not in self.restarted
            and any(w in said for w in self.words)
        )


@dataclass(frozen=True)
class SourceRefusal:
    """A change of the source system a connector cannot deliver exactly (a file
    truncated and regrown between two polls): the task that meets it must stop, its
    log naming what happened, having delivered nothing of it. Made once the load ended
    and the output caught up, so whatever is delivered after it came of it."""

    name: str
    edit: Callable[[], dict[str, Any] | None]
    """Makes the change. One the running tasks cannot meet (their server failed over
    to a read replica) returns the connector config that reaches the changed system:
    the kit then restarts the tasks on it under a new generation, as a spec edit or a
    restart behind a moved address would."""
    says: str
    """Words the log of the task it stopped shows."""


class SourceSubject(Protocol):
    """A connector under test and its source system. Subclass it to inherit the
    defaults (no faults of its own, the same task count after the restart, nothing to
    release)."""

    name: str
    """The test id."""
    connector: str
    """``spec.connector.type``: an installed connector's name or ``package.module:Class``."""
    tasks_max: int
    boundary: str
    """``spec.transactionBoundary``: ``poll``, ``interval`` or ``connector``."""
    interval_ms: int | None = None
    """``spec.transactionBoundaryIntervalMs`` under ``interval``."""
    takes_snapshot: bool = False
    """Whether a task first reads what the source already holds (a snapshot), which
    the kit then SIGKILLs inside: ``snapshot_underway`` says when."""

    @property
    def restart_tasks_max(self) -> int:
        """``tasksMax`` of generation 2: another count than ``tasks_max`` moves work
        between tasks at the restart."""
        return self.tasks_max

    def config(self, workdir: Path, size: KitSize) -> dict[str, Any]:
        """Prepares the source system (a table, a directory, an upstream topic) and
        returns ``spec.connector.config``; called once, both generations use it."""
        ...

    def load(self, size: KitSize, bootstrap: str, topic: str) -> BackgroundWork:
        """The work (not started yet) changing the source system for at least
        ``size.load_s`` seconds, including every kind of change the connector must
        deliver exactly (updates, deletes, partial writes, a new file mid-run). The kit
        counts a fault as landed under load only while this thread is alive."""
        ...

    def audit(self, bootstrap: str, topic: str) -> KitAudit:
        """Reads ``topic`` ``read_committed``, then the source system's ground truth (in
        that order, so the truth holds everything delivered), and compares them. The
        kit calls it once ``topic`` holds records."""
        ...

    def snapshot_underway(self, stored: Sequence[Mapping[str, Any]]) -> bool:
        """Whether the tasks' committed source offsets ``stored`` say a snapshot still
        has rows to read (asked only when ``takes_snapshot``)."""
        return False

    def faults(self) -> list[SourceFault]:
        return []

    def refusals(self) -> list[SourceRefusal]:
        return []

    def close(self) -> None:
        """Releases what the subject holds in the source system (a replication slot),
        called once no task of the run is left."""
        return None


FaultKind = Literal["sigkill", "snapshot", "source", "generation"]


@dataclass(frozen=True)
class FaultEvent:
    kind: FaultKind
    name: str
    hit: bool
    """A SIGKILL ended a live task (inside a snapshot: every task, and the snapshot was
    still underway after it); a source fault hit something; generation 1 stopped on
    its SIGTERM."""
    during_load: bool
    """The load was still running when the fault was over."""


@dataclass(frozen=True)
class KitReport:
    subject: str
    audit: KitAudit
    events: tuple[FaultEvent, ...]
    aborted_by_kills: int
    """Aborted records in the output outside the generation change: transactions a
    SIGKILL left open."""
    aborted_at_generation_change: int
    restarts: int = 0
    """Tasks a source fault ended and the kit restarted (SourceFault.ends_tasks)."""
    refused: tuple[str, ...] = ()
    """The subject's refusals, each of which stopped a task with nothing delivered."""

    def summary(self) -> str:
        kinds = {kind: sum(e.kind == kind for e in self.events) for kind in get_args(FaultKind)}
        return (
            f"{self.subject}: {kinds}, {self.restarts} tasks restarted after source faults, "
            f"{self.aborted_by_kills} records aborted by kills, "
            f"{self.audit.records} records, {len(self.audit.problems)} problems, "
            f"{len(self.audit.behind)} behind; refused: {list(self.refused)}"
        )


def fault_schedule(faults: int, source_faults: Sequence[str], rng: random.Random) -> list[str]:
    """The run's steps in order: ``faults`` faults, shuffled, with the generation change
    in the middle. Half of them go to the subject's own faults (each at least once),
    the rest are SIGKILLs, half of those of every task at once while a transaction is
    open (the moment a kill loses most) and half of one task at a random moment."""
    own = max(len(source_faults), faults // 2) if source_faults else 0
    kills = faults - own
    if kills < 2:
        raise ValueError(
            f"{faults} faults leave {kills} SIGKILL(s) beside {len(source_faults)} source "
            "faults; raise ONCEFLOW_CHAOS_KILLS"
        )
    steps = [source_faults[n % len(source_faults)] for n in range(own)]
    steps += [KILL_ALL] * (kills // 2) + [KILL_ONE] * (kills - kills // 2)
    rng.shuffle(steps)
    half = len(steps) // 2
    return [*steps[:half], GENERATION_CHANGE, *steps[half:]]


def fault_evidence_problems(
    report: KitReport, source_faults: Sequence[str], takes_snapshot: bool = False
) -> list[str]:
    """Why the run's faults are not proven to have landed; empty when they are."""
    problems: list[str] = []
    if takes_snapshot and not any(e.kind == "snapshot" and e.hit for e in report.events):
        problems.append(
            "no SIGKILL landed inside the snapshot: give the source more rows to read first"
        )
    late = [e.name for e in report.events if not e.during_load]
    if late:
        problems.append(
            f"{len(late)} fault(s) came after the load had ended (first: {late[0]}): pace "
            "the load to last KitSize.load_s"
        )
    missed = [e.name for e in report.events if e.kind == "sigkill" and not e.hit]
    if missed:
        problems.append(f"SIGKILLs that found a task already gone: {missed[:5]}")
    if any(e.kind == "generation" and not e.hit for e in report.events):
        problems.append("generation 1 did not stop on SIGTERM (see its task logs)")
    for name in source_faults:
        if not any(e.name == name and e.hit for e in report.events):
            problems.append(f"{name!r} never hit")
    if report.aborted_by_kills == 0:
        problems.append(
            "no SIGKILL landed inside an open transaction: the output holds no aborted "
            "record besides the generation change's"
        )
    return problems


def run_source_kit(
    subject: SourceSubject, bootstrap: str, workdir: Path, size: KitSize
) -> KitReport:
    """One run (see the module docstring); raises AssertionError when its faults are not
    proven. The caller asserts the audit."""
    run = _KitRun(subject, bootstrap, workdir, size)
    try:
        report = run.run()
    finally:
        run.stop_tasks()
        subject.close()
    problems = fault_evidence_problems(
        report, [f.name for f in run.source_faults], subject.takes_snapshot
    )
    assert not problems, f"{report.summary()}; faults not proven: {problems}"
    return report


def _log_tail(path: Path, lines: int = 15) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


class _KitRun:
    """The state of one run: its plan, its load and the current generation's tasks."""

    def __init__(
        self, subject: SourceSubject, bootstrap: str, workdir: Path, size: KitSize
    ) -> None:
        self.subject, self.bootstrap, self.workdir, self.size = subject, bootstrap, workdir, size
        self.rng = random.Random(SEED)
        self.source_faults = subject.faults()
        self.config = subject.config(workdir, size)
        self.desired = self._plan(subject.tasks_max)
        self.topic = self.desired.source.spec.topic
        self.authority = workdir / "state.json"
        self.load = subject.load(size, bootstrap, self.topic)
        self.tasks: list[TaskProcess] = []
        self.generation = 0
        self.watch: TransactionWatch | None = None
        self.aborted_at_change = 0
        self.expected_exits: list[ExpectedExit] = []
        """Exits struck faults may cause, while they may (SourceFault.ends_tasks)."""
        self.restarts = 0

    def _plan(
        self, tasks_max: int, name: str | None = None, config: dict[str, Any] | None = None
    ) -> DesiredTasks:
        return plan(
            self.bootstrap,
            connector=self.subject.connector,
            tasks_max=tasks_max,
            config=config or self.config,
            support="required",
            boundary=self.subject.boundary,
            interval_ms=self.subject.interval_ms,
            name=name,
        )

    def run(self) -> KitReport:
        self._start_generation(1)
        self.load.released.clear()  # its last part waits for the last fault
        self.load.start()
        events = self._kill_in_snapshot() if self.subject.takes_snapshot else []
        wait_for(self._first_records_committed, FIRST_RECORDS_S, "the first committed records")
        self.watch = TransactionWatch(self.bootstrap, self.topic)
        names = [f.name for f in self.source_faults]
        steps: dict[str, Callable[[], FaultEvent]] = {
            KILL_ONE: self._kill_one,
            KILL_ALL: self._kill_all_mid_transaction,
            GENERATION_CHANGE: self._change_generation,
            **{f.name: self._striker(f) for f in self.source_faults},
        }
        for step in fault_schedule(self.size.faults, names, self.rng):
            if step != KILL_ALL:  # which finds its own moment
                time.sleep(self.rng.uniform(*GAP_S))  # fault timing, not synchronisation
            # Right before the step: a task a source fault ended may exit a poll later.
            self._check_alive()
            events.append(steps[step]())
        self.load.released.set()
        audit = self._settle()
        aborted = aborted_records(self.bootstrap, self.topic)
        refused = tuple(self._refuse(refusal, audit) for refusal in self.subject.refusals())
        return KitReport(
            self.subject.name,
            audit,
            tuple(events),
            aborted_by_kills=aborted - self.aborted_at_change,
            aborted_at_generation_change=self.aborted_at_change,
            restarts=self.restarts,
            refused=refused,
        )

    def _refuse(self, refusal: SourceRefusal, settled: KitAudit) -> str:
        """Makes the change and waits for a task to stop on it; nothing may have been
        delivered since the output caught up."""
        moved = refusal.edit()
        if moved is not None:
            self._next_generation(self.subject.restart_tasks_max, moved)

        def stopped() -> bool:
            return any(
                not task.alive
                and task.wait(0) == ExitCode.ERROR
                and refusal.says in task.log_of_this_run()
                for task in self.tasks
            )

        wait_for(stopped, REFUSAL_S, f"a task to stop on {refusal.name!r} ({refusal.says!r})")
        after = self.subject.audit(self.bootstrap, self.topic).records
        assert after == settled.records, (
            f"{refusal.name}: {after - settled.records} records delivered after it"
        )
        return refusal.name

    def _start_generation(self, generation: int) -> None:
        self.generation = generation
        write_generation(self.authority, generation, self.desired.task_count, "enabled")
        settings = generation_settings(self.desired, generation, self.authority)
        self.tasks = [TaskProcess(s, self.workdir).start() for s in settings]

    def _next_generation(self, tasks_max: int, config: dict[str, Any] | None = None) -> bool:
        """What the supervisor does for a new generation: record the intent, stop the
        old tasks, fence their transactional ids, start the new tasks. Returns whether
        every old task stopped on the SIGTERM."""
        old = self.desired
        self.desired = self._plan(tasks_max, old.source.metadata.name, config)
        write_generation(self.authority, self.generation + 1, self.desired.task_count, "enabled")
        for task in self.tasks:
            task.signal(signal.SIGTERM)
        codes = [task.wait(30) for task in self.tasks]
        ids = task_transactional_ids(
            old.pipeline.transactional_id_prefix, old.source.metadata.name, old.task_count
        )
        fencing = fence_transactional_ids(self.bootstrap, ids)
        assert fencing.ok, fencing.summary()
        self._start_generation(self.generation + 1)
        # A task restarted a moment ago may die of the SIGTERM before it handles it.
        return all(code in (ExitCode.STOPPED, -signal.SIGTERM) for code in codes)

    def _signal_all(self, signum: int) -> None:
        for task in self.tasks:
            task.signal(signum)

    def _check_alive(self) -> None:
        """A task that exited by itself is a failure of its own (no supervisor here),
        unless a struck fault ends tasks that way: then it is restarted, as its pod's
        container would be."""
        for task in self.tasks:
            if not task.alive:
                code, tail = task.wait(0), _log_tail(task.log_path)
                said = task.log_of_this_run()
                expected = next(
                    (e for e in self.expected_exits if e.explains(task.settings.task_id, said)),
                    None,
                )
                if code == ExitCode.ERROR and expected is not None:
                    expected.restarted.add(task.settings.task_id)
                    self.restarts += 1
                    task.start()
                    continue
                raise AssertionError(f"{task.log_path.name} exited {code} by itself:\n{tail}")

    def _first_records_committed(self) -> bool:
        self._check_alive()
        if offsets_written(self.bootstrap, self.topic) == 0:
            return False  # the subject's audit may read only an existing topic
        return self.subject.audit(self.bootstrap, self.topic).records > 0

    def _event(self, kind: FaultKind, name: str, hit: bool) -> FaultEvent:
        return FaultEvent(kind, name, hit, during_load=self.load.is_alive())

    def _kill_one(self) -> FaultEvent:
        index = self.rng.randrange(len(self.tasks))
        victim = self.tasks[index]
        victim.signal(signal.SIGKILL)
        code = victim.wait(30)
        victim.start()
        return self._event("sigkill", f"sigkill task {index}", code == -signal.SIGKILL)

    def _kill_all_mid_transaction(self) -> FaultEvent:
        """Every task at once while a transaction is open, as when their node is lost. A
        transaction lasts milliseconds, too short to see and then kill, so the tasks are
        frozen (SIGSTOP) and the output looked at once what they had sent has landed: a
        transaction still open then can no longer commit, and the SIGKILL leaves it for
        the restarted tasks to abort. Each freeze follows the output growing, when a
        task writes: a fast task idle between a paced load's bursts would otherwise be
        frozen idle every time, and tasks frozen while they start would only start
        slower. With none caught open, the tasks run on and are frozen at the next
        growth, for up to OPEN_TRANSACTION_WAIT_S."""
        assert self.watch is not None
        deadline = time.monotonic() + OPEN_TRANSACTION_WAIT_S
        self._check_alive()
        caught = False
        while self._output_grows(deadline):
            self._signal_all(signal.SIGSTOP)
            time.sleep(IN_FLIGHT_S)
            caught = self.watch.open()
            if caught or time.monotonic() > deadline:
                break
            self._signal_all(signal.SIGCONT)
            time.sleep(self.rng.uniform(0.0, 0.02))  # fault timing, not synchronisation
        self._signal_all(signal.SIGKILL)
        codes = [task.wait(30) for task in self.tasks]
        for task in self.tasks:
            task.start()
        name = KILL_ALL if caught else f"{KILL_ALL} (none caught open)"
        return self._event("sigkill", name, all(code == -signal.SIGKILL for code in codes))

    def _output_grows(self, deadline: float) -> bool:
        """Waits until the output grows (a task is writing); False at the deadline."""
        assert self.watch is not None
        written = self.watch.written()
        while self.watch.written() == written:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)
        return True

    def _kill_in_snapshot(self) -> list[FaultEvent]:
        """Every task SIGKILLed at a random moment while the snapshot runs, up to
        SNAPSHOT_KILLS times: each once the committed offsets moved since the last (the
        restarted tasks resumed it since the last kill) and still say it is underway. A
        kill landed inside it when they still say so after the kill: the tasks died with
        rows left to read."""
        events: list[FaultEvent] = []
        seen: list[dict[str, Any]] | None = None
        for _ in range(SNAPSHOT_KILLS):

            def moved(before: list[dict[str, Any]] | None = seen) -> bool:
                self._check_alive()
                stored = list(stored_offsets(self.desired).values())
                return bool(stored) and stored != before

            wait_for(moved, FIRST_RECORDS_S, "the snapshot to commit progress")
            if not self.subject.snapshot_underway(list(stored_offsets(self.desired).values())):
                break
            time.sleep(self.rng.uniform(*SNAPSHOT_PAUSE_S))  # fault timing
            self._signal_all(signal.SIGKILL)
            codes = [task.wait(30) for task in self.tasks]
            for task in self.tasks:
                task.start()
            # Read once the tasks restarted: a kill inside a commit leaves a transaction
            # open, which a committed read waits out until a new task aborts it.
            seen = list(stored_offsets(self.desired).values())
            underway = self.subject.snapshot_underway(seen)
            killed = all(code == -signal.SIGKILL for code in codes)
            events.append(self._event("snapshot", KILL_IN_SNAPSHOT, killed and underway))
        return events

    def _striker(self, fault: SourceFault) -> Callable[[], FaultEvent]:
        def strike() -> FaultEvent:
            if fault.ends_tasks:
                until = time.monotonic() + ENDED_BY_FAULT_S
                self.expected_exits.append(ExpectedExit(fault.ends_tasks, until))
            return self._event("source", fault.name, fault.strike())

        return strike

    def _change_generation(self) -> FaultEvent:
        """Generation 2, halfway through the faults. The aborted records counted around
        it are the stop's and the fencing's, not a kill's."""
        aborted_before = aborted_records(self.bootstrap, self.topic)
        before = self.desired.task_count
        stopped = self._next_generation(self.subject.restart_tasks_max)
        self.aborted_at_change = aborted_records(self.bootstrap, self.topic) - aborted_before
        name = f"{GENERATION_CHANGE} ({before} -> {self.desired.task_count} tasks)"
        return self._event("generation", name, stopped)

    def _settle(self) -> KitAudit:
        """The audit once the load ended and the output caught up with the source (or
        showed a problem, which no later record can undo)."""
        self.load.join(self.size.load_s * 3 + 120)
        assert not self.load.is_alive(), f"the load still runs {self.size.load_s * 3 + 120}s on"
        assert self.load.error is None, f"the load failed: {self.load.error!r}"
        latest: list[KitAudit] = []

        def settled() -> bool:
            self._check_alive()
            latest[:] = [self.subject.audit(self.bootstrap, self.topic)]
            return latest[-1].caught_up or bool(latest[-1].problems)

        try:
            wait_for(settled, SETTLE_S, "the output to catch up with the source", interval_s=2)
        except AssertionError as failure:
            behind = latest[-1].behind[:10] if latest else []
            raise AssertionError(f"{failure}; still behind: {behind}") from None
        return latest[-1]

    def stop_tasks(self) -> None:
        self.load.released.set()  # a run that failed midway must not leave it waiting
        alive = [task for task in self.tasks if task.alive]
        for task in alive:
            task.signal(signal.SIGTERM)
            task.signal(signal.SIGCONT)  # a failure may have come while they were frozen
        for task in alive:
            task.wait(30)
