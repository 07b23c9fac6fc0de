"""One reconcile loop per object, woken by the watches of what its pass reads.

A fixed timer per object made the operator's idle cost grow with the number of
objects (500 sources at 1 s were 500 passes a second with nothing to do). Here an
object's loop runs a pass, then sleeps until a watch event about something the pass
reads wakes it, or until the delay ``RequeuePolicy`` gives for how the pass ended.
Passes run on the operator's own thread pool, so a slow fence or an API server
hiccup never holds kopf's handler workers.

What wakes what (kept here so the rule has one home):
- any event of an object wakes that object's loop, except the echo of a status its
  own pass wrote;
- a workload's event wakes its Pipeline (which aggregates workloads), and the one
  it left when it moved;
- a KafkaSource that appears, goes or changes its topic wakes the SparkJobs that
  name it as input;
- a Pipeline's event wakes its workloads only when what they read of it changed
  (spec or current mode), not on each rollout message it records;
- a pod, Job or SparkApplication labelled with its owner wakes the owner;
- a ConfigMap wakes the SparkJobs whose transform code it holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, NamedTuple, Protocol

from onceflow.control.errors import RetryLaterError
from onceflow.control.failures import ReportedFailureError
from onceflow.control.kube import StaleStatusError
from onceflow.control.operator_metrics import count_pass
from onceflow.logic.requeue import Outcome, RequeuePolicy

log = logging.getLogger("onceflow")

SOURCES, PIPELINES, SPARK_JOBS = "kafkasources", "pipelines", "sparkjobs"


class Key(NamedTuple):
    plural: str
    namespace: str
    name: str


def run_pass(reconcile: Callable[[str, str], bool], key: Key) -> tuple[Outcome, float | None]:
    """One pass, and how it ended; ``reconcile`` answers whether the object settled.
    Every pass of every kind is counted and timed here, the one place they all go."""
    started = time.monotonic()
    outcome, delay = _ended(reconcile, key)
    count_pass(key.plural, outcome, time.monotonic() - started)
    return outcome, delay


def _ended(reconcile: Callable[[str, str], bool], key: Key) -> tuple[Outcome, float | None]:
    try:
        settled = reconcile(key.namespace, key.name)
    except RetryLaterError as pending:
        log.info("%s %s/%s: %s", key.plural, key.namespace, key.name, pending)
        return Outcome.RETRY, pending.delay_s
    except StaleStatusError as stale:
        # Somebody wrote the object since it was read; its watch event wakes us too.
        log.info("%s %s/%s: %s", key.plural, key.namespace, key.name, stale)
        return Outcome.RETRY, 0.0
    except ReportedFailureError as reported:
        log.warning(
            "%s %s/%s: %s",
            key.plural,
            key.namespace,
            key.name,
            reported,
            exc_info=reported.unexpected,
        )
        return Outcome.FAILED, None
    except Exception:
        log.exception("%s %s/%s: reconcile pass failed", key.plural, key.namespace, key.name)
        return Outcome.FAILED, None
    return (Outcome.SETTLED if settled else Outcome.PROGRESSING), None


class StopFlag(Protocol):
    """kopf's daemon stop flag, as a loop uses it."""

    def is_set(self) -> bool: ...

    def wait(self) -> Awaitable[object]: ...


class ReconcileLoops:
    def __init__(self, policy: RequeuePolicy, workers: int) -> None:
        self.policy = policy
        self.executor = ThreadPoolExecutor(workers, thread_name_prefix="reconcile")
        self._wakeups: dict[Key, asyncio.Event] = {}
        self._passes: dict[Key, Future[tuple[Outcome, float | None]]] = {}
        self._pipeline_of: dict[Key, str] = {}
        self._members: dict[tuple[str, str], set[Key]] = {}
        self._code_of: dict[Key, str] = {}
        self._code_users: dict[tuple[str, str], set[Key]] = {}
        self._inputs_of: dict[Key, tuple[str, ...]] = {}
        self._readers: dict[tuple[str, str], set[Key]] = {}
        self._topics: dict[Key, object] = {}
        self._pipeline_marks: dict[tuple[str, str], object] = {}
        self._event_loop: asyncio.AbstractEventLoop | None = None

    async def run(self, key: Key, reconcile: Callable[[str, str], bool], stopped: StopFlag) -> None:
        """The loop of one object, until kopf's ``stopped`` flag is set (the object is
        gone or peering paused this replica)."""
        self._event_loop = asyncio.get_running_loop()
        wakeup = self._wakeups[key] = asyncio.Event()
        stop = asyncio.ensure_future(stopped.wait())
        streak = 0
        try:
            await self._previous_pass(key)
            while not stopped.is_set():
                wakeup.clear()
                outcome, asked = await self._pass(key, reconcile)
                streak = 0 if outcome is Outcome.SETTLED else streak + 1
                woken = asyncio.ensure_future(wakeup.wait())
                await asyncio.wait(
                    {woken, stop},
                    timeout=self.policy.delay(
                        outcome, streak, asked, spread=random.random(), objects=len(self._wakeups)
                    ),
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if woken.done():
                    streak = 0  # something it reads changed: look now, poll from the start
                woken.cancel()
        finally:
            stop.cancel()
            if self._wakeups.get(key) is wakeup:
                del self._wakeups[key]

    async def _pass(
        self, key: Key, reconcile: Callable[[str, str], bool]
    ) -> tuple[Outcome, float | None]:
        # The thread's future is kept: a loop kopf cancels mid-pass ends, its pass does
        # not, and the object's next loop must not start a second pass beside it.
        running = self._passes[key] = self.executor.submit(run_pass, reconcile, key)
        ended = await asyncio.wrap_future(running)
        del self._passes[key]
        return ended

    async def _previous_pass(self, key: Key) -> None:
        running = self._passes.get(key)
        if running is not None and not running.done():
            log.info("%s %s/%s: waiting for its previous pass", *key)
            await asyncio.wrap_future(running)

    async def finalize(self, key: Key, finalize: Callable[[], None], timeout_s: float) -> None:
        """Runs a deletion's ``finalize`` on the loops' own workers, once a pass of ``key``
        still running ends (at most ``timeout_s`` later): it does not race the last pass
        of a loop kopf stopped, and a broker that does not answer its fencing holds one
        of these workers, not kopf's, which also answer admission reviews."""
        running = self._passes.get(key)
        if running is not None:
            # However it ends (done, failed, still running at the timeout), deletion goes on.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(running)), timeout_s)
        await asyncio.get_running_loop().run_in_executor(self.executor, finalize)

    def wake(self, key: Key) -> None:
        wakeup = self._wakeups.get(key)
        if wakeup is not None:
            wakeup.set()

    def wake_from_thread(self, key: Key) -> None:
        """``wake`` for a caller on another thread than the loops' (a source system's
        answer arriving on its own thread)."""
        if self._event_loop is not None:
            self._event_loop.call_soon_threadsafe(self.wake, key)

    # -- watch events -----------------------------------------------------------------

    def workload_event(
        self, key: Key, body: Mapping[str, Any], deleted: bool, own_write: bool = False
    ) -> None:
        """``own_write``: the event is the echo of a status the object's own pass wrote,
        which that pass already knows; those who read the object still hear of it."""
        spec = body.get("spec") or {}
        pipeline = None if deleted else spec.get("pipeline")
        previous = self._pipeline_of.get(key)
        self._move(key, previous, pipeline, self._pipeline_of, self._members)
        if key.plural == SPARK_JOBS:
            code = None if deleted else (spec.get("transform") or {}).get("configMap")
            self._move(key, self._code_of.get(key), code, self._code_of, self._code_users)
            self._index_inputs(key, () if deleted else (spec.get("input") or {}).get("sources"))
        if not own_write:
            self.wake(key)
        for name in {previous, pipeline} - {None}:
            self.wake(Key(PIPELINES, key.namespace, str(name)))
        if key.plural == SOURCES:
            topic = None if deleted else spec.get("topic")
            if self._topics.get(key, ()) != topic:
                for reader in self._readers.get((key.namespace, key.name), ()):
                    self.wake(reader)
            if deleted:
                self._topics.pop(key, None)
            else:
                self._topics[key] = topic

    def pipeline_event(
        self, key: Key, body: Mapping[str, Any], deleted: bool, own_write: bool = False
    ) -> None:
        namespace, name = key.namespace, key.name
        if not own_write:
            self.wake(key)
        # What workloads read of it: the spec (generation counts spec changes only, status
        # being a subresource) and the current mode, not the step messages it records.
        seen = (
            body.get("metadata", {}).get("generation"),
            ((body.get("status") or {}).get("exactlyOnce") or {}).get("current"),
        )
        if deleted:
            self._pipeline_marks.pop((namespace, name), None)
        elif self._pipeline_marks.get((namespace, name)) == seen:
            return
        else:
            self._pipeline_marks[(namespace, name)] = seen
        for member in self._members.get((namespace, name), ()):
            self.wake(member)

    def owned_event(self, owner: Key) -> None:
        """A pod, Job or SparkApplication of ``owner`` changed."""
        self.wake(owner)

    def configmap_event(self, namespace: str, name: str) -> None:
        for user in self._code_users.get((namespace, name), ()):
            self.wake(user)

    def _index_inputs(self, key: Key, sources: Any) -> None:
        names = tuple(sorted(str(s) for s in sources or ()))
        for name in self._inputs_of.pop(key, ()):
            _discard(self._readers, (key.namespace, name), key)
        if names:
            self._inputs_of[key] = names
            for name in names:
                self._readers.setdefault((key.namespace, name), set()).add(key)

    @staticmethod
    def _move(
        key: Key,
        before: str | None,
        after: str | None,
        of: dict[Key, str],
        users: dict[tuple[str, str], set[Key]],
    ) -> None:
        """Moves ``key`` from the users of ``before`` to those of ``after``."""
        if before == after:
            return
        if before is not None:
            _discard(users, (key.namespace, before), key)
        if after:
            of[key] = after
            users.setdefault((key.namespace, after), set()).add(key)
        else:
            of.pop(key, None)


def _discard(users: dict[tuple[str, str], set[Key]], at: tuple[str, str], key: Key) -> None:
    group = users.get(at)
    if group is not None:
        group.discard(key)
        if not group:
            del users[at]
