"""The requeue policy and what wakes which loop (no API server: events are given)."""

from __future__ import annotations

import asyncio
import contextlib
import threading

import pytest

from onceflow.control.errors import RetryLaterError
from onceflow.control.reconcile_loops import (
    PIPELINES,
    SOURCES,
    SPARK_JOBS,
    Key,
    ReconcileLoops,
    run_pass,
)
from onceflow.logic.requeue import Outcome, RequeuePolicy

POLICY = RequeuePolicy(resync_s=120.0, first_poll_s=1.0, max_poll_s=30.0)


def test_a_settled_object_waits_for_the_resync_spread_by_ten_percent() -> None:
    assert POLICY.delay(Outcome.SETTLED, 0) == 120.0
    assert POLICY.delay(Outcome.SETTLED, 0, spread=0.0) == pytest.approx(108.0)
    assert POLICY.delay(Outcome.SETTLED, 0, spread=1.0) == pytest.approx(132.0)


def test_more_objects_than_the_resync_budget_covers_are_resynced_less_often() -> None:
    """5 resyncs a second at most: 600 objects fit 120 s, 2,000 share 400 s, so the
    idle cost stops growing with the number of objects."""
    assert POLICY.delay(Outcome.SETTLED, 0, objects=600) == 120.0
    assert POLICY.delay(Outcome.SETTLED, 0, objects=2000) == pytest.approx(400.0)
    assert POLICY.delay(Outcome.SETTLED, 0, spread=0.0, objects=2000) == pytest.approx(360.0)
    unbounded = RequeuePolicy(resync_s=120.0, resyncs_per_s=0)
    assert unbounded.delay(Outcome.SETTLED, 0, objects=2000) == 120.0
    assert POLICY.delay(Outcome.PROGRESSING, 1, objects=2000) == 1.0, "only resyncs stretch"


def test_the_budget_never_stretches_a_resync_past_its_longest() -> None:
    """Past 3,000 objects the period stays at 600 s: what only a resync looks at (a
    slot's retained WAL) is never older than that."""
    assert POLICY.delay(Outcome.SETTLED, 0, objects=10_000) == 600.0
    assert POLICY.longest_resync_s == pytest.approx(660.0)
    unbounded = RequeuePolicy(resync_s=120.0, resyncs_per_s=0)
    assert unbounded.longest_resync_s == pytest.approx(132.0)
    assert RequeuePolicy(resync_s=900.0).delay(Outcome.SETTLED, 0, objects=10_000) == 900.0


def test_an_unsettled_object_is_never_looked_at_less_often_than_a_settled_one() -> None:
    policy = RequeuePolicy(resync_s=10.0, first_poll_s=1.0, max_poll_s=30.0)
    assert policy.delay(Outcome.PROGRESSING, 9) == 10.0


def test_an_unsettled_object_is_polled_less_and_less_often_up_to_the_cap() -> None:
    delays = [POLICY.delay(Outcome.PROGRESSING, streak) for streak in range(1, 9)]
    assert delays == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
    assert POLICY.delay(Outcome.FAILED, 3) == 4.0


def test_a_retry_waits_what_it_asked_but_never_less_than_the_grown_poll() -> None:
    assert POLICY.delay(Outcome.RETRY, 1, asked_s=5.0) == 5.0
    assert POLICY.delay(Outcome.RETRY, 1, asked_s=0.0) == 1.0
    assert POLICY.delay(Outcome.RETRY, 4, asked_s=1.0) == 8.0
    assert POLICY.delay(Outcome.RETRY, 9, asked_s=60.0) == 60.0


def test_a_pass_names_how_it_ended() -> None:
    key = Key(SOURCES, "ns", "s")

    def retry(namespace: str, name: str) -> bool:
        raise RetryLaterError("fencing", 5.0)

    def broken(namespace: str, name: str) -> bool:
        raise KeyError("status")

    assert run_pass(lambda n, m: True, key) == (Outcome.SETTLED, None)
    assert run_pass(lambda n, m: False, key) == (Outcome.PROGRESSING, None)
    assert run_pass(retry, key) == (Outcome.RETRY, 5.0)
    assert run_pass(broken, key) == (Outcome.FAILED, None)


def _source(pipeline: str) -> dict[str, object]:
    return {"spec": {"pipeline": pipeline}}


def _pipeline(generation: int, current: str, step: str = "") -> dict[str, object]:
    rollout = {"current": current, "step": step}
    return {"metadata": {"generation": generation}, "status": {"exactlyOnce": rollout}}


class Recorder(ReconcileLoops):
    """Records wake-ups instead of waking loops."""

    def __init__(self) -> None:
        super().__init__(POLICY, workers=1)
        self.woken: list[Key] = []

    def wake(self, key: Key) -> None:
        self.woken.append(key)

    def take(self) -> set[Key]:
        woken, self.woken = set(self.woken), []
        return woken


def _job(pipeline: str, *sources: str) -> dict[str, object]:
    return {"spec": {"pipeline": pipeline, "input": {"sources": list(sources)}}}


def test_a_workload_wakes_itself_and_its_pipeline_but_not_itself_for_its_own_write() -> None:
    loops = Recorder()
    job = Key(SPARK_JOBS, "ns", "j")
    loops.workload_event(job, _job("p"), deleted=False)
    assert loops.take() == {job, Key(PIPELINES, "ns", "p")}
    loops.workload_event(job, _job("p"), deleted=False, own_write=True)
    assert loops.take() == {Key(PIPELINES, "ns", "p")}


def test_a_source_wakes_the_spark_jobs_naming_it_when_it_comes_goes_or_moves_topic() -> None:
    loops = Recorder()
    job = Key(SPARK_JOBS, "ns", "j")
    source = Key(SOURCES, "ns", "s")
    loops.workload_event(job, _job("p", "s"), deleted=False)
    loops.take()
    loops.workload_event(source, {"spec": {"pipeline": "q", "topic": "t"}}, deleted=False)
    assert job in loops.take(), "a job of another pipeline reads it too"
    loops.workload_event(source, {"spec": {"pipeline": "q", "topic": "t"}}, deleted=False)
    assert job not in loops.take(), "a status write does not concern its readers"
    loops.workload_event(source, {"spec": {"pipeline": "q", "topic": "u"}}, deleted=False)
    assert job in loops.take()
    loops.workload_event(source, {"spec": {"pipeline": "q", "topic": "u"}}, deleted=True)
    assert job in loops.take()
    loops.workload_event(job, _job("p"), deleted=False)
    loops.take()
    loops.workload_event(source, {"spec": {"pipeline": "q", "topic": "v"}}, deleted=False)
    assert job not in loops.take(), "the job no longer names it"


def test_a_pipeline_wakes_its_workloads_only_when_what_they_read_changed() -> None:
    loops = Recorder()
    members = {Key(SOURCES, "ns", "a"), Key(SPARK_JOBS, "ns", "b")}
    for member in members:
        loops.workload_event(member, _source("p"), deleted=False)
    loops.workload_event(Key(SOURCES, "ns", "other"), _source("q"), deleted=False)
    loops.take()
    pipeline = Key(PIPELINES, "ns", "p")
    loops.pipeline_event(Key(PIPELINES, "ns", "p"), _pipeline(1, "disabled"), deleted=False)
    assert loops.take() == {pipeline, *members}
    # A status write that only records workload summaries or a step message: the
    # pipeline alone (its workloads read the spec and the current mode).
    loops.pipeline_event(
        Key(PIPELINES, "ns", "p"), _pipeline(1, "disabled", "waiting for 3/50"), deleted=False
    )
    assert loops.take() == {pipeline}
    loops.pipeline_event(Key(PIPELINES, "ns", "p"), _pipeline(1, "preparing"), deleted=False)
    assert loops.take() == {pipeline, *members}
    # The pipeline's own write moving the mode on: its workloads must hear, it need not.
    loops.pipeline_event(pipeline, _pipeline(1, "enabled"), deleted=False, own_write=True)
    assert loops.take() == members
    loops.pipeline_event(Key(PIPELINES, "ns", "p"), _pipeline(1, "preparing"), deleted=True)
    assert loops.take() == {pipeline, *members}


def test_a_workload_that_moves_to_another_pipeline_or_goes_leaves_the_old_one() -> None:
    loops = Recorder()
    source = Key(SOURCES, "ns", "s")
    loops.workload_event(source, _source("p"), deleted=False)
    loops.take()
    loops.workload_event(source, _source("q"), deleted=False)
    assert loops.take() == {source, Key(PIPELINES, "ns", "p"), Key(PIPELINES, "ns", "q")}
    loops.pipeline_event(Key(PIPELINES, "ns", "p"), _pipeline(2, "enabled"), deleted=False)
    assert loops.take() == {Key(PIPELINES, "ns", "p")}
    loops.pipeline_event(Key(PIPELINES, "ns", "q"), _pipeline(2, "enabled"), deleted=False)
    assert source in loops.take()
    loops.workload_event(source, _source("q"), deleted=True)
    loops.take()
    loops.pipeline_event(Key(PIPELINES, "ns", "q"), _pipeline(3, "enabled"), deleted=False)
    assert loops.take() == {Key(PIPELINES, "ns", "q")}


def test_a_configmap_wakes_the_spark_jobs_whose_code_it_holds() -> None:
    loops = Recorder()
    job = Key(SPARK_JOBS, "ns", "j")
    loops.workload_event(job, {"spec": {"transform": {"configMap": "code"}}}, deleted=False)
    loops.take()
    loops.configmap_event("ns", "code")
    loops.configmap_event("ns", "unrelated")
    loops.configmap_event("other", "code")
    assert loops.woken == [job]


def test_a_loop_runs_again_when_woken_and_not_before() -> None:
    asyncio.run(_woken_loop())


async def _woken_loop() -> None:
    loops = ReconcileLoops(RequeuePolicy(resync_s=60.0), workers=1)
    key = Key(SOURCES, "ns", "s")
    passes: list[int] = []

    def reconcile(namespace: str, name: str) -> bool:
        passes.append(len(passes))
        return True

    stop = asyncio.Event()
    loop = asyncio.create_task(loops.run(key, reconcile, stop))
    await _until(lambda: len(passes) == 1)
    await asyncio.sleep(0.3)
    assert len(passes) == 1, "a settled object waits for the resync"
    loops.wake(key)
    await _until(lambda: len(passes) == 2)
    stop.set()
    await asyncio.wait_for(loop, 5)
    loops.wake(key)  # a wake-up for a loop that ended is dropped
    assert len(passes) == 2


def test_an_unsettled_object_is_looked_at_again_after_its_poll() -> None:
    asyncio.run(_polled_loop())


async def _polled_loop() -> None:
    loops = ReconcileLoops(RequeuePolicy(first_poll_s=0.05, max_poll_s=0.05), workers=1)
    passes: list[int] = []

    def reconcile(namespace: str, name: str) -> bool:
        passes.append(len(passes))
        return len(passes) >= 3

    stop = asyncio.Event()
    loop = asyncio.create_task(loops.run(Key(SOURCES, "ns", "s"), reconcile, stop))
    await _until(lambda: len(passes) == 3)
    await asyncio.sleep(0.3)
    stop.set()
    await asyncio.wait_for(loop, 5)
    assert len(passes) == 3, "settled after the third pass: no fourth before the resync"


def test_the_resync_budget_is_shared_by_every_loop() -> None:
    asyncio.run(_budgeted_loops())


async def _budgeted_loops() -> None:
    """Four settled objects at a 0.01 s resync and 10 resyncs a second share 0.4 s each:
    over a second each passes about three times, not a hundred."""
    loops = ReconcileLoops(RequeuePolicy(resync_s=0.01, resyncs_per_s=10.0), workers=2)
    passes: dict[str, int] = {}

    def reconcile(namespace: str, name: str) -> bool:
        passes[name] = passes.get(name, 0) + 1
        return True

    stop = asyncio.Event()
    running = [
        asyncio.create_task(loops.run(Key(SOURCES, "ns", name), reconcile, stop)) for name in "abcd"
    ]
    await _until(lambda: len(passes) == 4)
    await asyncio.sleep(1.0)
    stop.set()
    await asyncio.wait_for(asyncio.gather(*running), 5)
    assert all(2 <= count <= 6 for count in passes.values()), passes


def test_a_loop_started_while_a_cancelled_one_still_passes_waits_for_that_pass() -> None:
    asyncio.run(_overlapping_loops())


async def _overlapping_loops() -> None:
    loops = ReconcileLoops(RequeuePolicy(resync_s=60.0), workers=2)
    key = Key(SOURCES, "ns", "s")
    release = threading.Event()
    running: list[int] = []
    most: list[int] = [0]

    def reconcile(namespace: str, name: str) -> bool:
        running.append(1)
        most[0] = max(most[0], len(running))
        release.wait(5)
        running.pop()
        return True

    first = asyncio.create_task(loops.run(key, reconcile, asyncio.Event()))
    await _until(lambda: len(running) == 1)
    first.cancel()  # kopf gave up waiting for it: its pass goes on in its thread
    with contextlib.suppress(asyncio.CancelledError):
        await first
    stop = asyncio.Event()
    second = asyncio.create_task(loops.run(key, reconcile, stop))
    await asyncio.sleep(0.2)
    release.set()
    await _until(lambda: most[0] == 1 and not running)
    await asyncio.sleep(0.1)
    stop.set()
    await asyncio.wait_for(second, 5)
    assert most[0] == 1, "two passes of one object ran at once"


def test_a_loop_stopped_before_it_starts_runs_no_pass() -> None:
    asyncio.run(_stopped_loop())


async def _stopped_loop() -> None:
    loops = ReconcileLoops(RequeuePolicy(), workers=1)
    stop = asyncio.Event()
    stop.set()
    passes: list[int] = []
    await loops.run(Key(SOURCES, "ns", "s"), lambda n, m: passes.append(1) or True, stop)
    assert passes == []


async def _until(condition: object, timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():  # type: ignore[operator]
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)
