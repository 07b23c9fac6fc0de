"""The generation protocol: single decisions, and whole walks with a crash after every
step against a simulated world of workers and fencing (the invariant: when a task
starts, nothing of another generation can still commit)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest

from onceflow.api import ExactlyOnceMode
from onceflow.api.pipeline import WorkloadState
from onceflow.api.source import OffsetsChangeResult
from onceflow.logic.fence_backoff import FenceFailures
from onceflow.logic.generations import GenerationRecord, OffsetsOutcome
from onceflow.logic.offsets_change import applied
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
    ids_to_fence,
    next_step,
)
from onceflow.model.tasks import DesiredGeneration, OffsetsRequest

D, P, E = ExactlyOnceMode.DISABLED, ExactlyOnceMode.PREPARING, ExactlyOnceMode.ENABLED


def desired(
    count: int, mode: ExactlyOnceMode, fp: str = "a", prefix: str = "ns.p", topic: str = "off"
) -> DesiredGeneration:
    ids = tuple(f"{prefix}/source/src/{i}" for i in range(count))
    return DesiredGeneration(count, mode, fp, ids, topic)


def settled(d: DesiredGeneration, generation: int = 1) -> GenerationRecord:
    first = GenerationRecord.first(d)
    return replace(first, generation=generation, fenced_generation=generation)


def test_nothing_recorded_records_a_pending_first_generation() -> None:
    step = next_step(None, desired(2, E), Observed(), FenceFailures(), 0.0)
    assert isinstance(step, RecordIntent)
    assert (step.record.generation, step.record.fenced_generation) == (1, 0)
    assert step.record.previous_mode is None, "whatever ran before is unknown"


def test_a_changed_spec_records_the_next_generation_with_its_predecessor() -> None:
    old = settled(desired(3, E), generation=4)
    step = next_step(old, desired(2, E, fp="b"), Observed(), FenceFailures(), 0.0)
    assert isinstance(step, RecordIntent)
    new = step.record
    assert (new.generation, new.fenced_generation, new.task_count) == (5, 4, 2)
    assert new.previous_ids == old.ids and new.previous_mode is E


def test_a_pending_generation_whose_spec_moved_on_is_replanned_in_place() -> None:
    pending = settled(desired(3, E)).with_new_generation(desired(4, E, fp="b"))
    step = next_step(pending, desired(2, E, fp="c"), Observed(), FenceFailures(), 0.0)
    assert isinstance(step, RecordIntent)
    assert (step.record.generation, step.record.task_count) == (2, 2)
    assert step.record.previous_ids == pending.previous_ids, "the same predecessor to fence"


@pytest.mark.parametrize(
    ("old", "new", "fenced"),
    [
        (desired(3, E), desired(2, E, fp="b"), 3),  # shrink: every old id
        (desired(1, E), desired(1, E, fp="b"), 0),  # 1 -> 1, same id: the successor fences
        (desired(1, E), desired(1, E, fp="b", prefix="v2"), 1),  # renamed: not the same id
        (desired(1, E), desired(1, D, fp="b"), 1),  # a non-transactional successor fences none
        (desired(2, D), desired(2, D, fp="b"), 0),  # nothing transactional
        (desired(2, D), desired(2, E, fp="b"), 2),  # zombies of older ids, just in case
    ],
)
def test_ids_to_fence(old: DesiredGeneration, new: DesiredGeneration, fenced: int) -> None:
    record = settled(old).with_new_generation(new)
    assert len(ids_to_fence(record)) == fenced
    if fenced:
        assert ids_to_fence(record) == settled(old).ids


def test_a_renamed_offsets_topic_is_carried_after_fencing_even_the_same_id() -> None:
    """1 -> 1 with the same id normally leaves fencing to the successor; but the offsets
    are copied before the successor exists, so the old task must be fenced first or it
    could commit to the old topic after the copy."""
    record = settled(desired(1, E)).with_new_generation(desired(1, E, fp="b", topic="off2"))
    step = next_step(record, desired(1, E, fp="b", topic="off2"), Observed(), FenceFailures(), 0)
    assert isinstance(step, Fence) and step.carry_offsets == ("off", "off2")
    assert step.ids == record.previous_ids


def test_fencing_failures_back_off() -> None:
    record = settled(desired(2, E)).with_new_generation(desired(1, E, fp="b"))
    failures = FenceFailures().after_failure(now=10.0)
    step = next_step(record, desired(1, E, fp="b"), Observed(), failures, 10.5)
    assert isinstance(step, BackOff) and step.delay_s == pytest.approx(0.5)
    assert isinstance(next_step(record, desired(1, E, fp="b"), Observed(), failures, 11), Fence)


def test_steady_state_restarts_a_finished_task_and_starts_missing_ones() -> None:
    record = settled(desired(3, E))
    workers = (
        Worker("g1-0", 1, 0),
        Worker("g1-1", 1, 1, finished=True),
        Worker("g1-1-old", 1, 1, finished=True, stopping=True),
    )
    step = next_step(record, desired(3, E), Observed(workers), FenceFailures(), 0)
    assert step == Stop(("g1-1",))
    assert next_step(record, desired(3, E), Observed(workers[:1]), FenceFailures(), 0) == Start(
        1, (1, 2)
    )
    everyone = Observed(tuple(Worker(f"g1-{t}", 1, t) for t in range(3)))
    assert isinstance(next_step(record, desired(3, E), everyone, FenceFailures(), 0), Keep)


# -- whole walks against a simulated world, crashing after every step -----------------


@dataclass
class SimWorker:
    name: str
    generation: int | None
    task: int
    tx_id: str | None
    """None: non-transactional, cannot be fenced."""
    stopping: bool = False
    fenced: bool = False
    stuck: bool = False
    """Never goes away (a lost node): only fencing can make it harmless."""
    grace: int = 0
    """Ticks it keeps running after being asked to stop (a slow final commit)."""


@dataclass
class World:
    record: GenerationRecord | None
    workers: list[SimWorker] = field(default_factory=list)
    failures: FenceFailures = field(default_factory=FenceFailures)
    fence_fails: int = 0
    started: list[int] = field(default_factory=list)
    carried: list[tuple[str, str]] = field(default_factory=list)

    def observed(self) -> Observed:
        return Observed(
            tuple(Worker(w.name, w.generation, w.task, stopping=w.stopping) for w in self.workers)
        )

    def tick(self) -> None:
        """Time passes: stopped workers use up their grace period, then go (unless stuck)."""
        for worker in self.workers:
            if worker.stopping:
                worker.grace -= 1
        self.workers = [w for w in self.workers if not w.stopping or w.stuck or w.grace >= 0]

    def could_still_commit(self, generation: int) -> list[SimWorker]:
        """Producers of other generations that could still write, whatever the mode of
        ``generation``: an at-least-once task started next to a predecessor that has not
        flushed its final offsets writes that predecessor's last records again."""
        return [
            w
            for w in self.workers
            if w.generation != generation and not (w.tx_id is not None and w.fenced)
        ]

    def fence(self, ids: tuple[str, ...]) -> None:
        for worker in self.workers:
            if worker.tx_id in ids:
                worker.fenced = True

    def execute(self, step: Step, d: DesiredGeneration, crash_inside_fence: bool) -> None:
        if isinstance(step, RecordIntent):
            self.record = step.record
        elif isinstance(step, Stop):
            for worker in self.workers:
                if worker.name in step.names:
                    worker.stopping = True
        elif isinstance(step, Fence):
            if self.fence_fails:
                self.fence_fails -= 1
                self.failures = self.failures.after_failure(0.0)
                return
            self.fence(step.ids)
            if crash_inside_fence:
                return  # fenced, but the record was never written
            if step.carry_offsets:
                self.carried.append(step.carry_offsets)
            if step.then.stopped:
                writers = [w for w in self.workers if not (w.tx_id is not None and w.fenced)]
                assert not writers, f"recorded as stopped while {writers} could still commit"
            self.record = step.then
        elif isinstance(step, Start):
            assert self.record is not None
            for task in step.tasks:
                tx_id = d.ids[task] if d.mode.transactional else None
                # Initialising fences every earlier producer of the same id, and a task
                # reads offsets only after that: what remains must not be able to commit.
                self.fence((tx_id,) if tx_id else ())
                self.workers.append(
                    SimWorker(f"g{step.generation}-{task}", step.generation, task, tx_id)
                )
            harmful = self.could_still_commit(step.generation)
            assert not harmful, f"generation {step.generation} started next to {harmful}"
            self.started.extend(step.tasks)


def walk(world: World, d: DesiredGeneration, crash_at: int | None) -> World:
    """Drives the protocol to Keep; ``crash_at``: the step after which the driver
    crashes (its memory, the fence failures, is lost; the world and record stay)."""
    for count in range(60):
        step = next_step(world.record, d, world.observed(), world.failures, 100.0)
        if isinstance(step, Keep):
            return world
        world.execute(step, d, crash_inside_fence=count == crash_at)
        if count == crash_at:
            world.failures = FenceFailures()
        if isinstance(step, (WaitGone, BackOff, Stop)):
            world.tick()
            if isinstance(step, BackOff):
                world.failures = FenceFailures()  # time passed beyond the back-off
    raise AssertionError(f"no steady state: {world}")


def _running(d: DesiredGeneration, generation: int) -> list[SimWorker]:
    return [
        SimWorker(f"g{generation}-{t}", generation, t, d.ids[t] if d.mode.transactional else None)
        for t in range(d.task_count)
    ]


SCENARIOS = {
    "shrink, transactional": (desired(3, E), desired(2, E, fp="b"), False),
    "1 to 1, same id": (desired(1, E), desired(1, E, fp="b"), False),
    "prefix renamed": (desired(2, E), desired(2, E, fp="b", prefix="v2"), False),
    "enable after disabled": (desired(2, D), desired(2, E, fp="b"), False),
    "enable after preparing": (desired(2, P), desired(3, E, fp="b"), False),
    "downgrade": (desired(2, E), desired(3, D, fp="b"), False),
    "preparing after disabled": (desired(2, D), desired(2, P, fp="b"), False),
    "resize while disabled": (desired(3, D), desired(2, D, fp="b"), False),
    "stuck transactional pod": (desired(2, E), desired(2, E, fp="b", prefix="v2"), True),
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
@pytest.mark.parametrize("crash_at", [None, 0, 1, 2, 3, 4])
def test_a_crash_after_any_step_never_starts_next_to_a_live_producer(
    name: str, crash_at: int | None
) -> None:
    old, new, stuck = SCENARIOS[name]
    world = World(record=settled(old), workers=_running(old, 1), fence_fails=1)
    for worker in world.workers:
        worker.stuck, worker.grace = stuck, 2
    walk(world, new, crash_at)
    assert world.record is not None and world.record.generation == 2
    assert sorted(world.started) == list(range(new.task_count))
    assert not world.could_still_commit(2)


def test_a_stuck_non_transactional_predecessor_blocks_the_transactional_successor() -> None:
    old, new = desired(2, D), desired(2, E, fp="b")
    world = World(record=settled(old), workers=_running(old, 1))
    world.workers[0].stuck = True
    world.record = settled(old).with_new_generation(new)
    step = next_step(world.record, new, world.observed(), FenceFailures(), 0)
    assert isinstance(step, Stop)
    world.execute(step, new, crash_inside_fence=False)
    world.tick()
    step = next_step(world.record, new, world.observed(), FenceFailures(), 0)
    assert isinstance(step, WaitGone) and step.names == ("g1-0",)


@pytest.mark.parametrize("mode", [D, E])
def test_a_recreated_source_stops_what_its_earlier_incarnation_left(mode: ExactlyOnceMode) -> None:
    """No record (a re-created KafkaSource, a lost status) but pods of generation 7 run:
    generation 1 starts only once they are stopped, and gone where nothing can fence."""
    old = desired(2, D)
    world = World(record=None, workers=_running(old, 7))
    for worker in world.workers:
        worker.grace = 2
    walk(world, desired(3, mode), crash_at=None)
    assert world.record is not None and world.record.generation == 1
    assert all(w.generation == 1 or w.stopping for w in world.workers)


def test_a_renamed_offsets_topic_is_carried_before_the_new_generation_starts() -> None:
    old, new = desired(1, E), desired(1, E, fp="b", topic="off2")
    world = walk(World(record=settled(old), workers=_running(old, 1)), new, crash_at=None)
    assert world.carried == [("off", "off2")]


def test_a_worker_of_another_incarnation_is_not_ours_whatever_its_number() -> None:
    """A status wiped while pods ran: the new record is generation 1 again, and so are
    the old pods; the incarnation tells them apart."""
    record = settled(desired(1, E))
    stale = Worker("g1-0", 1, 0, incarnation="earlier")
    assert next_step(record, desired(1, E), Observed((stale,)), FenceFailures(), 0) == Stop(
        ("g1-0",)
    )
    ours = Worker("g1-0", 1, 0, incarnation=record.incarnation)
    assert isinstance(next_step(record, desired(1, E), Observed((ours,)), FenceFailures(), 0), Keep)


def test_a_task_made_from_an_outdated_template_is_rolled_in_its_generation() -> None:
    """Image or resources edited: no new generation (same configs, same ids), but each
    pod made from the old template is replaced; its successor's init fences it."""
    record = settled(desired(2, E))
    workers = (
        Worker("g1-0", 1, 0, template="new"),
        Worker("g1-1", 1, 1, template="old"),
    )
    observed = Observed(workers, template="new")
    assert next_step(record, desired(2, E), observed, FenceFailures(), 0) == Stop(("g1-1",))
    rolling = Observed((workers[0], Worker("g1-1", 1, 1, template="old", stopping=True)), "new")
    assert isinstance(next_step(record, desired(2, E), rolling, FenceFailures(), 0), Keep)


def test_a_pod_name_held_by_another_incarnation_is_not_reused_until_gone() -> None:
    record = settled(desired(2, D))
    leaving = Worker("g1-0", 1, 0, incarnation="earlier", stopping=True)
    step = next_step(record, desired(2, D), Observed((leaving,)), FenceFailures(), 0)
    assert step == Start(1, (1,))


# -- states: paused and stopped are steps of the same walk --------------------------

RUNNING, PAUSED, STOPPED = WorkloadState.RUNNING, WorkloadState.PAUSED, WorkloadState.STOPPED


def in_state(d: DesiredGeneration, state: WorkloadState) -> DesiredGeneration:
    return replace(d, state=state)


def test_a_state_change_is_recorded_before_anything_else_and_keeps_the_generation() -> None:
    record = settled(desired(2, E))
    workers = Observed(tuple(Worker(f"g1-{t}", 1, t) for t in range(2)))
    step = next_step(record, in_state(desired(2, E), STOPPED), workers, FenceFailures(), 0)
    assert isinstance(step, RecordIntent)
    assert step.record.state is STOPPED and not step.record.stop_fenced
    assert (step.record.generation, step.record.ids) == (record.generation, record.ids)


def test_paused_tasks_keep_running_and_a_missing_one_starts_paused() -> None:
    record = replace(settled(desired(3, E)), state=PAUSED)
    workers = Observed((Worker("g1-0", 1, 0), Worker("g1-1", 1, 1)))
    step = next_step(record, in_state(desired(3, E), PAUSED), workers, FenceFailures(), 0)
    assert step == Start(1, (2,)), "its tasks read the recorded state and hold still"


def test_stopping_stops_every_task_then_fences_the_generation_without_waiting() -> None:
    d = in_state(desired(2, E), STOPPED)
    record = replace(settled(desired(2, E)), state=STOPPED)
    workers = (Worker("g1-0", 1, 0), Worker("g1-1", 1, 1))
    assert next_step(record, d, Observed(workers), FenceFailures(), 0) == Stop(("g1-0", "g1-1"))
    stopping = Observed(tuple(replace(w, stopping=True) for w in workers))
    step = next_step(record, d, stopping, FenceFailures(), 0)
    assert isinstance(step, Fence) and step.ids == record.ids and step.then.stopped
    assert isinstance(next_step(step.then, d, stopping, FenceFailures(), 0), Keep)


def test_a_stopped_generation_without_transactions_is_stopped_once_its_tasks_are_gone() -> None:
    d = in_state(desired(2, D), STOPPED)
    record = replace(settled(desired(2, D)), state=STOPPED)
    stopping = Observed((Worker("g1-0", 1, 0, stopping=True),))
    assert isinstance(next_step(record, d, stopping, FenceFailures(), 0), WaitGone)
    step = next_step(record, d, Observed(), FenceFailures(), 0)
    assert isinstance(step, Fence) and step.ids == () and step.then.stopped


def test_a_spec_change_while_stopped_fences_the_predecessor_and_starts_nothing() -> None:
    record = replace(settled(desired(2, E)), state=STOPPED, stop_fenced=True)
    d = in_state(desired(3, E, fp="b"), STOPPED)
    world = walk(World(record=record), d, crash_at=None)
    assert world.record is not None and world.record.generation == 2 and world.record.stopped
    assert world.started == []


@pytest.mark.parametrize("mode", [D, E])
@pytest.mark.parametrize("crash_at", [None, 0, 1, 2, 3])
def test_stop_then_resume_with_a_crash_after_any_step_leaves_no_second_writer(
    mode: ExactlyOnceMode, crash_at: int | None
) -> None:
    """Stop (recorded -> stopped -> fenced or gone -> recorded), then resume: the
    fencing step asserts that nothing could commit once "stopped" is recorded, and the
    start that nothing of another generation could."""
    d = desired(2, mode)
    world = World(record=settled(d), workers=_running(d, 1), fence_fails=1)
    for worker in world.workers:
        worker.grace = 2
    walk(world, in_state(d, STOPPED), crash_at)
    assert world.record is not None and world.record.stopped
    assert world.workers == [] or mode.transactional
    assert not world.could_still_commit(0), "every task of the generation is fenced or gone"
    for _ in range(3):
        world.tick()  # fenced tasks finish stopping while the source is stopped
    walk(world, d, crash_at)
    assert world.record.state is RUNNING and world.record.generation == 1
    assert sorted(world.started) == [0, 1], "resumed in the same generation, same ids"


def test_a_stuck_task_of_a_stopped_transactional_source_is_fenced_not_waited_for() -> None:
    d = desired(2, E)
    world = World(record=settled(d), workers=_running(d, 1))
    for worker in world.workers:
        worker.stuck = True
    walk(world, in_state(d, STOPPED), crash_at=None)
    assert world.record is not None and world.record.stopped
    assert all(w.fenced for w in world.workers)


# -- offsets changes: refused unless stopping, applied once stopped, once per id -------


REFUSED, APPLIED = OffsetsChangeResult.REFUSED, OffsetsChangeResult.APPLIED


def with_change(d: DesiredGeneration, change_id: str = "c1") -> DesiredGeneration:
    return replace(d, offsets_change=OffsetsRequest(change_id, False, (({"stream": "s0"}, None),)))


def test_an_offsets_change_asked_of_a_running_source_is_refused_for_good() -> None:
    record = settled(desired(2, E))
    step = next_step(record, with_change(desired(2, E)), Observed(), FenceFailures(), 0)
    assert isinstance(step, RecordIntent)
    outcome = step.record.offsets_change
    assert outcome is not None and (outcome.id, outcome.result) == ("c1", REFUSED)
    assert "only while the source is stopped" in outcome.message
    after = next_step(step.record, with_change(desired(2, E)), Observed(), FenceFailures(), 0)
    assert after == Start(1, (0, 1)), "refused once; the source goes on as it was"


def _walk_offsets_change(
    world: World, wanted: DesiredGeneration, crash_at: int | None, then: DesiredGeneration
) -> list[str]:
    """Drives the change with ``wanted`` until the offsets are written (a crash at step
    ``crash_at`` loses that step's record write), then with ``then`` (a user who
    resumed meanwhile) until nothing is left to do; returns the ids written, in order."""
    written: list[str] = []
    asked = wanted
    for count in range(60):
        step = next_step(world.record, asked, world.observed(), world.failures, 100.0)
        if isinstance(step, Keep):
            break
        if isinstance(step, CheckOffsets):
            assert world.record is not None and world.record.stopped
            if count != crash_at:
                applying = OffsetsOutcome(
                    step.request.id, OffsetsChangeResult.APPLYING, writing=step.request.entries
                )
                world.record = step.record.with_offsets_change(applying)
            continue
        if isinstance(step, WriteOffsets):
            assert not world.could_still_commit(0), "offsets written while a task could commit"
            assert step.record.state is STOPPED, "written while the source may run"
            change = step.record.offsets_change
            assert change is not None and change.applying
            written.append(change.id)
            asked = then
            if count != crash_at:  # else written, but the outcome never recorded
                world.record = step.record.with_offsets_change(applied(change, 1))
            continue
        pending = world.record.offsets_change if world.record is not None else None
        assert pending is None or not pending.applying, (
            f"{type(step).__name__} while the change was half written"
        )
        world.execute(step, asked, crash_inside_fence=count == crash_at)
        if isinstance(step, (WaitGone, BackOff, Stop)):
            world.tick()
    return written


@pytest.mark.parametrize("crash_at", [None, *range(8)])
def test_an_offsets_change_is_applied_once_the_stop_is_fenced_and_never_twice(
    crash_at: int | None,
) -> None:
    d = desired(2, E)
    world = World(record=settled(d), workers=_running(d, 1))
    wanted = with_change(in_state(d, STOPPED))
    written = _walk_offsets_change(world, wanted, crash_at, then=wanted)
    assert world.record is not None and world.record.offsets_change is not None
    assert world.record.offsets_change.result is APPLIED
    assert written == ["c1"] * len(written) and 1 <= len(written) <= 2
    resumed = next_step(world.record, with_change(d), Observed(), FenceFailures(), 0)
    assert isinstance(resumed, RecordIntent) and resumed.record.state is RUNNING, (
        "the same id is not refused (nor applied again) once the source runs"
    )


@pytest.mark.parametrize("crash_at", [None, *range(8)])
def test_a_change_half_written_is_finished_before_a_resume_moves_anything(
    crash_at: int | None,
) -> None:
    """The user resumes while the change is being written: a crash after the write (or
    inside its transaction) must neither record it Refused nor let a task start before
    the same change is written again and Applied (review of session 9)."""
    d = desired(2, E)
    world = World(record=settled(d), workers=_running(d, 1))
    written = _walk_offsets_change(
        world, with_change(in_state(d, STOPPED)), crash_at, then=with_change(d)
    )
    assert world.record is not None and world.record.offsets_change is not None
    assert world.record.offsets_change.result is APPLIED, world.record.offsets_change
    assert world.record.state is RUNNING and sorted(world.started) == [0, 1]
    assert written and set(written) == {"c1"}


def test_an_earlier_change_brought_back_from_git_is_not_applied_again() -> None:
    """c1 applied, then c2: a manifest re-applied with c1 (an Argo CD rollback) would
    have written c1's offsets a second time when only the last id was compared."""
    d = desired(2, E)
    world = World(record=settled(d), workers=_running(d, 1))
    stopped = in_state(d, STOPPED)
    assert _walk_offsets_change(world, with_change(stopped, "c1"), None, then=stopped) == ["c1"]
    assert _walk_offsets_change(world, with_change(stopped, "c2"), None, then=stopped) == ["c2"]
    assert world.record is not None and world.record.offsets_change is not None
    assert world.record.offsets_change.earlier == ("c1",)
    stored = GenerationRecord.from_json(world.record.to_json(), lambda _: (), "")
    assert next_step(stored, with_change(stopped, "c1"), Observed(), FenceFailures(), 0) == Keep()


def test_a_stop_with_a_spec_change_of_one_unchanged_id_fences_the_old_task() -> None:
    """1 -> 1 with the same id leaves fencing to the successor's initialisation; a
    stopped source starts no successor, so the stop itself must fence it (review)."""
    d = desired(1, E)
    world = World(record=settled(d), workers=_running(d, 1))
    for worker in world.workers:
        worker.stuck = True
    walk(world, in_state(desired(1, E, fp="b"), STOPPED), crash_at=None)
    assert world.record is not None and world.record.stopped
    assert all(w.fenced for w in world.workers)
