"""The SparkJob plan: single decisions, the classification of spec changes, and whole
walks with a crash after every step against a simulated job (a driver object or
process, its pods, the sink's producers), under the operator's durability and
``onceflow run``'s (the invariants: no driver starts next to another one or a producer
of another set, and a job ends as its spec asks)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import pytest

from onceflow.api.input_reset import InputReset, InputResetResult, InputResetStatus
from onceflow.api.pipeline import WorkloadState
from onceflow.api.spark import Sink
from onceflow.logic.sink_handover import FenceSink, RecordSink, SinkProducers, StopDriver
from onceflow.logic.spark_changes import SpecChange, classify_change
from onceflow.logic.spark_plan import (
    COMPLETED,
    BackOff,
    DriverExited,
    DriverSeen,
    Keep,
    RecordInputReset,
    Restart,
    SparkDesired,
    SparkObservation,
    SparkRecord,
    SparkRunning,
    SparkStep,
    Submit,
    SwitchSubmitter,
    WaitPreviousDriver,
    WriteSettings,
    next_spark_step,
)
from onceflow.logic.spark_state import (
    FenceSinkIds,
    HeldStill,
    RecordState,
    RemoveDriver,
    WaitPodsGone,
)

RUNNING, PAUSED, STOPPED = WorkloadState.RUNNING, WorkloadState.PAUSED, WorkloadState.STOPPED
JOB = "agg"
P2 = SinkProducers("p", 2)
KAFKA = Sink.model_validate({"kafka": {"topic": "out", "partitions": 2}})
POSTGRES = Sink.model_validate({"postgres": {"table": "t", "secretRef": {"name": "db"}}})


def reset(reset_id: str) -> InputReset:
    return InputReset.model_validate(
        {"id": reset_id, "startingOffsets": "earliest", "acknowledgeReplays": True}
    )


RUNNING_DRIVER = DriverSeen("a", "RUNNING")


def observe(
    *,
    state: WorkloadState = RUNNING,
    spec: str = "a",
    wanted: SinkProducers | None = P2,
    asked_reset: InputReset | None = None,
    available_now: bool = False,
    recorded_state: WorkloadState | None = RUNNING,
    stop_fenced: bool = False,
    recorded: SinkProducers | None = P2,
    recorded_reset: InputResetStatus | None = None,
    fence_wait_s: float = 0.0,
    driver: DriverSeen | None = RUNNING_DRIVER,
    pods: bool = True,
    other_submission: bool = False,
    settings_written: bool = True,
    previous_gone: bool = False,
) -> SparkObservation:
    """A running job whose driver runs as its spec asks, but for what is given."""
    return SparkObservation(
        JOB,
        SparkDesired(
            state,
            spec,
            wanted,
            KAFKA if wanted else POSTGRES,
            ("in",),
            asked_reset,
            available_now,
        ),
        SparkRecord(recorded_state, stop_fenced, recorded, recorded_reset, fence_wait_s),
        SparkRunning(driver, pods, other_submission, settings_written, previous_gone),
    )


HELD: dict[str, Any] = {"recorded_state": STOPPED, "state": STOPPED, "driver": None, "pods": False}
IDS = P2.ids(JOB)
P3 = SinkProducers("p", 3)
STOP_FOR_P3 = StopDriver("sink partitions 2 -> 3: waiting for the old driver to stop")


@pytest.mark.parametrize(
    ("situation", "expected"),
    [
        ({}, Keep(P2)),
        ({"wanted": None}, Keep(None)),  # another sink: what is recorded is not its
        ({"state": STOPPED}, RecordState(STOPPED)),
        ({"state": STOPPED, "recorded_state": STOPPED}, RemoveDriver()),
        ({**HELD, "pods": True}, WaitPodsGone()),
        (HELD, FenceSinkIds(IDS)),
        ({**HELD, "fence_wait_s": 4.0}, BackOff(4.0, FenceSinkIds(IDS))),
        ({**HELD, "wanted": None, "fence_wait_s": 4.0}, FenceSinkIds(())),  # nothing waits
        ({**HELD, "stop_fenced": True}, HeldStill()),
        ({**HELD, "stop_fenced": True, "state": RUNNING}, RecordState(RUNNING)),
        ({"driver": None, "other_submission": True}, SwitchSubmitter()),
        ({"other_submission": True}, Keep(P2)),  # its own driver exists: none is another's
        ({"recorded": None, "driver": None}, RecordSink(P2)),
        ({"recorded": None}, StopDriver("no sink producers recorded for the running driver")),
        ({"wanted": P3}, STOP_FOR_P3),
        ({"wanted": P3, "driver": None}, FenceSink(IDS, P3, "sink partitions 2 -> 3")),
        (
            {"wanted": P3, "driver": None, "fence_wait_s": 2.0},
            BackOff(2.0, FenceSink(IDS, P3, "sink partitions 2 -> 3")),
        ),
        ({"settings_written": False}, WriteSettings(P2)),
        ({"settings_written": False, "spec": "b"}, WriteSettings(P2)),  # written first
        ({"spec": "b"}, Restart(P2)),
        ({"driver": DriverSeen(None, "RUNNING")}, Restart(P2)),  # its start unknown
        ({"spec": "b", "wanted": P3}, STOP_FOR_P3),  # handed over first
        ({"driver": None}, WaitPreviousDriver(P2)),
        ({"driver": None, "previous_gone": True}, Submit(P2)),
        ({"driver": DriverSeen("a", COMPLETED)}, DriverExited(P2)),
        ({"driver": DriverSeen("a", COMPLETED), "available_now": True}, Keep(P2)),
        ({"driver": DriverSeen("a", "FAILED")}, Keep(P2)),  # its submitter restarts it
    ],
)
def test_each_situation_has_one_next_step(situation: dict[str, Any], expected: SparkStep) -> None:
    assert next_spark_step(observe(**situation)) == expected


def test_an_input_reset_is_recorded_before_anything_else() -> None:
    waiting = next_spark_step(observe(asked_reset=reset("r1"), state=STOPPED))
    assert isinstance(waiting, RecordState), "a stop not yet fenced: the reset waits for it"
    step = next_spark_step(observe(asked_reset=reset("r1"), spec="b"))
    assert isinstance(step, RecordInputReset) and step.outcome.id == "r1"
    assert step.outcome.result is InputResetResult.REFUSED, "asked of a running job"
    held = {**HELD, "stop_fenced": True}
    step = next_spark_step(observe(asked_reset=reset("r2"), **held))
    assert isinstance(step, RecordInputReset) and step.outcome.result is InputResetResult.APPLIED
    again = observe(asked_reset=reset("r2"), recorded_reset=step.outcome, **held)
    assert next_spark_step(again) == HeldStill(), "a reset is recorded once"


# -- the classification of spec changes ------------------------------------------------


@pytest.mark.parametrize(
    ("recorded", "wanted", "running", "desired", "change"),
    [
        (P2, P2, "a", "a", SpecChange.NONE),
        (P2, P2, None, "a", SpecChange.NONE),  # nothing runs: nothing to replace
        (P2, P2, "a", "b", SpecChange.RESTART),
        (P2, P2, None, "b", SpecChange.NONE),
        (None, None, "a", "b", SpecChange.RESTART),  # another sink: no identity to hand over
        (P2, None, "a", "a", SpecChange.NONE),  # a Kafka sink's record left behind
        (P2, P3, "a", "a", SpecChange.HAND_OVER),  # repartitioned
        (P2, SinkProducers("q", 2), "a", "a", SpecChange.HAND_OVER),  # prefix renamed
        (None, P2, None, "a", SpecChange.HAND_OVER),  # nothing recorded: first record
        (None, P2, "a", "a", SpecChange.HAND_OVER),  # a lost record: whose ids, unknown
        (P2, P3, "a", "b", SpecChange.HAND_OVER),  # the most severe wins
        (SinkProducers("p", 2, "old"), P2, "a", "a", SpecChange.NONE),  # same set, renamed once
    ],
)
def test_each_change_is_classified_by_its_most_severe_kind(
    recorded: SinkProducers | None,
    wanted: SinkProducers | None,
    running: str | None,
    desired: str,
    change: SpecChange,
) -> None:
    driver_runs = running is not None
    assert classify_change(recorded, wanted, running, desired, driver_runs=driver_runs) is change


def test_a_driver_whose_start_is_unknown_is_replaced() -> None:
    """A driver object whose spec annotation was removed: nothing says what it runs."""
    assert classify_change(P2, P2, None, "a", driver_runs=True) is SpecChange.RESTART


# -- whole walks against a simulated job, crashing after every step ----------------------


class Flavour(Enum):
    OPERATOR = "operator"
    """Status is the record; the driver is an object whose pods outlive it."""
    RUN = "run"
    """``onceflow run``: the state lives in memory, a stopped driver process is gone at
    once, and a crash takes the driver with it."""


@dataclass
class Driver:
    incarnation: int
    spec: str
    producers: SinkProducers | None
    state: str | None = None


@dataclass
class Pod:
    incarnation: int
    """0: of a deleted job on the checkpoint."""
    deleted: bool = False
    grace: int = 1
    """Ticks it goes on after its deletion (finishing a batch)."""


@dataclass
class Record:
    state: WorkloadState | None = RUNNING
    stop_fenced: bool = False
    producers: SinkProducers | None = None
    input_reset: InputResetStatus | None = None
    fence_wait_s: float = 0.0


@dataclass(frozen=True)
class Wanted:
    state: WorkloadState
    spec: str
    producers: SinkProducers | None
    input_reset: InputReset | None = None
    available_now: bool = False


def _writers(producers: SinkProducers | None, incarnation: int) -> set[tuple[str, int]]:
    return {(i, incarnation) for i in producers.ids(JOB)} if producers else set()


Plan = Callable[[SparkObservation], SparkStep]


@dataclass
class Job:
    """A SparkJob's world: its record (durable), its driver, pods and the producers
    that could still commit (a lost node's executor outlives its pod: only fencing, or
    an initialisation of the same id, ends it), and what a pass keeps in memory."""

    flavour: Flavour
    record: Record = field(default_factory=Record)
    driver: Driver | None = None
    other: Driver | None = None
    """A driver object of the other submitter."""
    pods: list[Pod] = field(default_factory=list)
    writers: set[tuple[str, int]] = field(default_factory=set)
    settings: str | None = None
    fence_fails: int = 0
    submitted: list[int] = field(default_factory=list)
    killed: int = 0
    """Drivers a crash took with it (``run``), each to be started again."""
    settings_written: bool = False
    previous_gone: bool = False

    def __post_init__(self) -> None:
        if self.driver is not None:
            self.record.producers = self.record.producers or self.driver.producers
            self.settings = self.driver.spec

    def observation(self, wanted: Wanted) -> SparkObservation:
        operator = self.flavour == Flavour.OPERATOR
        record = self.record
        return SparkObservation(
            JOB,
            SparkDesired(
                wanted.state,
                wanted.spec,
                wanted.producers,
                KAFKA if wanted.producers else POSTGRES,
                ("in",),
                wanted.input_reset,
                wanted.available_now,
            ),
            SparkRecord(
                record.state,
                record.stop_fenced,
                record.producers,
                record.input_reset,
                record.fence_wait_s,
            ),
            SparkRunning(
                # A process reports no state, and has no pods that outlive it.
                DriverSeen(self.driver.spec, self.driver.state if operator else None)
                if self.driver
                else None,
                pods=bool(self.pods) and operator,
                other_submission=self.other is not None,
                settings_written=self.settings_written or not operator,
                previous_gone=self.previous_gone or not operator,
            ),
        )

    def tick(self) -> None:
        """Time passes: deleted pods use up their grace, then go; a backoff runs out."""
        for pod in self.pods:
            pod.grace -= pod.deleted
        self.pods = [p for p in self.pods if p.grace >= 0]
        self.record.fence_wait_s = max(0.0, self.record.fence_wait_s - 1.0)

    def remove(self, driver: Driver | None) -> None:
        """Deletes a driver object: its pods stop (at once for a process)."""
        for pod in self.pods:
            if driver is not None and pod.incarnation == driver.incarnation:
                pod.deleted = True
        if self.flavour == Flavour.RUN:
            self.pods = []

    def fence(self, ids: tuple[str, ...]) -> bool:
        if not ids:
            return True  # nothing to ask a broker
        if self.fence_fails:
            self.fence_fails -= 1
            return False
        self.writers = {w for w in self.writers if w[0] not in ids}
        return True

    def crash(self) -> None:
        """The driver of the plan is gone and back: what it kept in memory is lost."""
        self.settings_written = self.previous_gone = False
        if self.flavour == Flavour.RUN:
            # The run's state and backoff lived in memory; its driver process dies with
            # it (``processes.lifeline``), though a zombie's producers may live on.
            self.record.state, self.record.stop_fenced, self.record.fence_wait_s = (
                RUNNING,
                False,
                0.0,
            )
            self.killed += self.driver is not None
            self.driver, self.pods = None, []

    def new_pass(self) -> None:
        """The operator's pass ended (RetryLater): time passes, memory is lost."""
        if self.flavour == Flavour.OPERATOR:
            self.settings_written = self.previous_gone = False
        self.tick()

    def submit(self, step: Submit, wanted: Wanted) -> None:
        if self.flavour == Flavour.RUN:
            self.settings = wanted.spec  # a process is given its settings as it starts
        assert self.driver is None and self.other is None, "a second driver object"
        assert not self.pods, "started next to a driver that could still run a batch"
        assert self.settings == wanted.spec, "started on settings not written"
        assert step.sink == self.record.producers or step.sink is None
        ids = step.sink.ids(JOB) if step.sink else ()
        strangers = {w for w in self.writers if w[0] not in ids}
        assert not strangers, f"started next to producers of another set: {strangers}"
        incarnation = len(self.submitted) + 2
        self.writers = _writers(step.sink, incarnation)  # initialising fences the same ids
        self.driver = Driver(incarnation, wanted.spec, step.sink)
        self.pods.append(Pod(incarnation))
        self.submitted.append(incarnation)

    def execute(self, step: SparkStep, wanted: Wanted, crashed: bool) -> bool:
        """Runs ``step`` (a crash loses its record write); False when the pass ends."""
        if isinstance(step, (RecordInputReset, RecordState, RecordSink)):
            if not crashed:
                self._record(step)
            return True
        if isinstance(step, (FenceSinkIds, FenceSink)):
            return self._fence_then_record(step, crashed)
        if isinstance(step, (RemoveDriver, StopDriver, Restart, DriverExited, SwitchSubmitter)):
            return self._stop(step, wanted)
        return self._towards_a_start(step, wanted)

    def _record(self, step: RecordInputReset | RecordState | RecordSink) -> None:
        if isinstance(step, RecordInputReset):
            self.record.input_reset = step.outcome
        elif isinstance(step, RecordState):
            self.record.state, self.record.stop_fenced = step.state, False
        else:
            self.record.producers = step.producers

    def _fence_then_record(self, step: FenceSinkIds | FenceSink, crashed: bool) -> bool:
        if not self.fence(step.ids):
            self.record.fence_wait_s = 0.0 if crashed else 2.0
            return False
        if crashed:
            return True  # fenced, but the record never written
        if isinstance(step, FenceSink):
            self.record.producers = step.then
        else:
            self.record.stop_fenced = True
            assert not self.writers, f"held while {self.writers} could still commit"
        return True

    def _stop(
        self,
        step: RemoveDriver | StopDriver | Restart | DriverExited | SwitchSubmitter,
        wanted: Wanted,
    ) -> bool:
        if isinstance(step, SwitchSubmitter):
            self.remove(self.other)
            self.other = None
            return False
        if isinstance(step, RemoveDriver):
            assert self.record.state == wanted.state, "the state is recorded before the driver goes"
        self.remove(self.driver)
        self.driver = None
        return self.flavour is Flavour.RUN  # a process is gone at once: the walk goes on

    def _towards_a_start(self, step: SparkStep, wanted: Wanted) -> bool:
        if isinstance(step, WriteSettings):
            self.settings, self.settings_written = wanted.spec, True
        elif isinstance(step, WaitPreviousDriver):
            for pod in self.pods:
                pod.deleted = True
            self.previous_gone = not self.pods
            return self.previous_gone
        elif isinstance(step, Submit):
            self.submit(step, wanted)
        else:
            return False  # WaitPodsGone, BackOff: time must pass
        return True

    def walk(self, wanted: Wanted, crash_at: int | None, plan: Plan = next_spark_step) -> list[str]:
        """Drives the plan to Keep or HeldStill, with a crash after step ``crash_at``;
        returns the steps taken, by name."""
        taken: list[str] = []
        for count in range(40):
            step = plan(self.observation(wanted))
            taken.append(type(step).__name__)
            if isinstance(step, (Keep, HeldStill)):
                return taken
            goes_on = self.execute(step, wanted, crashed=count == crash_at)
            if count == crash_at:
                self.crash()
                self.new_pass()
            elif not goes_on:
                self.new_pass()
        raise AssertionError(f"no end: {taken}")


@dataclass(frozen=True)
class Scenario:
    start: Callable[[Flavour], Job]
    wanted: Wanted
    submits: int
    """Drivers the walk must start: exactly these, a crash anywhere notwithstanding."""
    flavours: tuple[Flavour, ...] = (Flavour.OPERATOR, Flavour.RUN)


def _running(
    producers: SinkProducers | None = P2, state: str = "RUNNING"
) -> Callable[[Flavour], Job]:
    def start(flavour: Flavour) -> Job:
        job = Job(flavour, driver=Driver(1, "a", producers, state), pods=[Pod(1)])
        job.writers = _writers(producers, 1)
        return job

    return start


def _held(producers: SinkProducers | None = P2) -> Callable[[Flavour], Job]:
    def start(flavour: Flavour) -> Job:
        # A stop under ``run`` lives as long as the run: a new one starts running.
        state = STOPPED if flavour == Flavour.OPERATOR else RUNNING
        fenced = flavour == Flavour.OPERATOR
        return Job(flavour, Record(state, fenced, producers), settings="a")

    return start


def _lost_record(flavour: Flavour) -> Job:
    job = _running()(flavour)
    job.record = Record()
    return job


def _left_behind(flavour: Flavour) -> Job:
    """A deleted job's driver on this checkpoint, still finishing a batch."""
    return Job(flavour, pods=[Pod(0, deleted=True, grace=2)])


def _other_submitter(flavour: Flavour) -> Job:
    job = _running()(flavour)
    job.other, job.driver = job.driver, None
    return job


RENAMED = SinkProducers("q", 2)
SCENARIOS = {
    "first start": Scenario(Job, Wanted(RUNNING, "a", P2), 1),
    "spec edited": Scenario(_running(), Wanted(RUNNING, "b", P2), 1),
    "repartitioned": Scenario(_running(), Wanted(RUNNING, "a", P3), 1),
    "prefix renamed": Scenario(_running(), Wanted(RUNNING, "a", RENAMED), 1),
    "renamed and edited": Scenario(_running(), Wanted(RUNNING, "b", SinkProducers("q", 4)), 1),
    "shrunk": Scenario(_running(P3), Wanted(RUNNING, "a", P2), 1),
    "record lost": Scenario(_lost_record, Wanted(RUNNING, "a", P2), 1),
    # A process's exit is its supervisor's restart policy's (``standalone.children``).
    "driver exited": Scenario(
        _running(state=COMPLETED), Wanted(RUNNING, "a", P2), 1, (Flavour.OPERATOR,)
    ),
    "available-now run done": Scenario(
        _running(state=COMPLETED), Wanted(RUNNING, "a", P2, available_now=True), 0
    ),
    "submitter switched": Scenario(
        _other_submitter, Wanted(RUNNING, "a", P2), 1, (Flavour.OPERATOR,)
    ),
    "stopped": Scenario(_running(), Wanted(STOPPED, "a", P2), 0),
    "paused while repartitioned": Scenario(_running(), Wanted(PAUSED, "b", P3), 0),
    "resumed": Scenario(_held(), Wanted(RUNNING, "a", P2), 1),
    "resumed repartitioned": Scenario(_held(), Wanted(RUNNING, "b", P3), 1),
    "another sink edited": Scenario(_running(None), Wanted(RUNNING, "b", None), 1),
    "another sink stopped": Scenario(_running(None), Wanted(STOPPED, "a", None), 0),
    # ``run`` stops what an earlier run left before it starts anything.
    "left on the checkpoint": Scenario(
        _left_behind, Wanted(RUNNING, "a", P2), 1, (Flavour.OPERATOR,)
    ),
    "reset refused while running": Scenario(
        _running(), Wanted(RUNNING, "a", P2, input_reset=reset("r1")), 0
    ),
    "reset while stopped": Scenario(_held(), Wanted(STOPPED, "a", P2, input_reset=reset("r1")), 0),
}


def _check_end(job: Job, scenario: Scenario, before: SinkProducers | None) -> None:
    wanted = scenario.wanted
    starts = len(job.submitted)
    assert scenario.submits <= starts <= scenario.submits + job.killed, job.submitted
    if wanted.state is not RUNNING:
        assert (job.driver, job.pods, job.writers) == (None, [], set()), "held, not still"
        assert job.record.stop_fenced and job.record.state is wanted.state
        return
    assert job.driver is not None and job.driver.spec == wanted.spec
    assert job.settings == wanted.spec
    assert job.other is None
    if wanted.producers is None:
        return
    record = job.record.producers
    assert record is not None and record.same_set(wanted.producers), "the hand-over is recorded"
    assert job.driver.producers == record, "the driver writes with the recorded set"
    assert {w[0] for w in job.writers} <= set(wanted.producers.ids(JOB)), "old ids fenced"
    if before is not None and before.prefix != wanted.producers.prefix:
        assert record.previous_prefix == before.prefix, "the renamed prefix is remembered"


CRASH_POINTS = 12
"""Steps after which a walk crashes: more than the longest crash-free walk takes
(``test_every_step_of_the_longest_walk_is_a_crash_point`` keeps it so)."""


def _crash_free_steps(name: str, flavour: Flavour) -> int:
    scenario = SCENARIOS[name]
    job = scenario.start(flavour)
    job.fence_fails = 1
    return len(job.walk(scenario.wanted, None))


def test_every_step_of_the_longest_walk_is_a_crash_point() -> None:
    longest = max(
        _crash_free_steps(name, flavour)
        for name in SCENARIOS
        for flavour in SCENARIOS[name].flavours
    )
    assert longest <= CRASH_POINTS, f"a walk of {longest} steps: raise CRASH_POINTS"


@pytest.mark.parametrize("crash_at", [None, *range(CRASH_POINTS)])
@pytest.mark.parametrize(
    ("name", "flavour"),
    [(name, flavour) for name in sorted(SCENARIOS) for flavour in SCENARIOS[name].flavours],
    ids=lambda value: value.value if isinstance(value, Flavour) else value,
)
def test_a_crash_after_any_step_neither_starts_a_second_driver_nor_loses_a_hand_over(
    name: str, flavour: Flavour, crash_at: int | None
) -> None:
    """Every fencing fails once, too, and is tried again after its backoff."""
    scenario = SCENARIOS[name]
    job = scenario.start(flavour)
    job.fence_fails = 1
    before = job.record.producers
    job.walk(scenario.wanted, crash_at)
    _check_end(job, scenario, before)
    if scenario.wanted.input_reset is not None:
        outcome = job.record.input_reset
        assert outcome is not None and outcome.id == scenario.wanted.input_reset.id
        applied = scenario.wanted.state is STOPPED
        assert (outcome.result is InputResetResult.APPLIED) is applied


@pytest.mark.parametrize(
    ("change", "spec", "wanted", "taken"),
    [
        (SpecChange.NONE, "a", P2, ["Keep"]),
        (SpecChange.RESTART, "b", P2, ["Restart", "WaitPreviousDriver", "Submit", "Keep"]),
        (
            SpecChange.HAND_OVER,
            "a",
            P3,
            ["StopDriver", "FenceSink", "WaitPreviousDriver", "Submit", "Keep"],
        ),
    ],
)
def test_each_kind_of_change_takes_its_own_way_to_the_new_driver(
    change: SpecChange, spec: str, wanted: SinkProducers, taken: list[str]
) -> None:
    """No kind is rolled in place (``logic.spark_changes``): a restart replaces the
    driver with the same producers, a hand-over fences the old ones in between."""
    job = _running()(Flavour.OPERATOR)
    assert classify_change(job.record.producers, wanted, "a", spec, driver_runs=True) is change
    steps = job.walk(Wanted(RUNNING, spec, wanted), crash_at=None)
    assert [s for s in dict.fromkeys(steps) if s != "WriteSettings"] == taken


def _recording_without_fencing(observed: SparkObservation) -> SparkStep:
    step = next_spark_step(observed)
    return RecordSink(step.then) if isinstance(step, FenceSink) else step


def _submitting_without_waiting(observed: SparkObservation) -> SparkStep:
    step = next_spark_step(observed)
    return Submit(step.sink) if isinstance(step, WaitPreviousDriver) else step


def _submitting_instead_of_restarting(observed: SparkObservation) -> SparkStep:
    step = next_spark_step(observed)
    return Submit(step.sink) if isinstance(step, Restart) else step


def _holding_without_fencing(observed: SparkObservation) -> SparkStep:
    step = next_spark_step(observed)
    return HeldStill() if isinstance(step, FenceSinkIds) else step


@pytest.mark.parametrize(
    ("name", "plan", "caught"),
    [
        ("prefix renamed", _recording_without_fencing, "producers of another set"),
        ("shrunk", _recording_without_fencing, "producers of another set"),
        ("spec edited", _submitting_without_waiting, "next to a driver"),
        ("spec edited", _submitting_instead_of_restarting, "a second driver object"),
        ("stopped", _holding_without_fencing, "held, not still"),
    ],
)
def test_the_walk_catches_a_plan_that_skips_a_step(name: str, plan: Plan, caught: str) -> None:
    """The walk can fail: a plan that records a new set without fencing the old one,
    submits before the old driver is gone, or holds without fencing, is caught."""
    scenario = SCENARIOS[name]
    job = scenario.start(Flavour.OPERATOR)
    before = job.record.producers
    with pytest.raises(AssertionError, match=caught):
        job.walk(scenario.wanted, crash_at=None, plan=plan)
        _check_end(job, scenario, before)


def test_a_crash_after_a_submit_keeps_the_driver_it_created() -> None:
    """The object is the proof: a pass after the crash finds it and submits nothing."""
    job = Job(Flavour.OPERATOR)
    steps = job.walk(Wanted(RUNNING, "a", P2), crash_at=3)
    assert steps[:4] == ["RecordSink", "WriteSettings", "WaitPreviousDriver", "Submit"]
    assert job.submitted == [2] and steps[-1] == "Keep"


def test_run_restarts_a_changed_driver_within_one_walk() -> None:
    """A process is gone once stopped: no pass ends between the stop and the start."""
    job = _running()(Flavour.RUN)
    steps = job.walk(Wanted(RUNNING, "a", P3), crash_at=None)
    assert steps == ["StopDriver", "FenceSink", "Submit", "Keep"]
    assert job.record.producers == P3
