"""One reconcile loop per object, woken by the watches of what its pass reads.

A fixed timer per object made the operator's idle cost grow with the number of
objects (500 sources at 1 s were 500 passes a second with nothing to do). Here an
object's loop runs a pass, then sleeps until a watch event about something the pass
reads wakes it, or until the delay ``RequeuePolicy`` gives for how the pass ended.
Passes run on the operator's own thread pool, so a slow fence or an API server
hiccup never holds kopf's handler workers.

What wakes what (kept here so the rule has one home):
- any event of an object wakes that object's loop;
- a workload's event wakes its Pipeline (which aggregates workloads), and a
  KafkaSource's also wakes its Pipeline's SparkJobs (they read its topic);
- a Pipeline's event wakes its workloads only when what they read of it changed
  (spec or rollout status), not on each workload summary it records;
- a pod, Job or SparkApplication labelled with its owner wakes the owner;
- a ConfigMap wakes the SparkJobs whose transform code it holds.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

from onceflow.control.errors import RetryLaterError
from onceflow.control.kube import StaleStatusError
from onceflow.logic.requeue import Outcome, RequeuePolicy

log = logging.getLogger("onceflow")

SOURCES, PIPELINES, SPARK_JOBS = "kafkasources", "pipelines", "sparkjobs"


class Key(NamedTuple):
    plural: str
    namespace: str
    name: str


def run_pass(reconcile: Callable[[str, str], bool], key: Key) -> tuple[Outcome, float | None]:
    """One pass, and how it ended; ``reconcile`` answers whether the object settled."""
    try:
        settled = reconcile(key.namespace, key.name)
    except RetryLaterError as pending:
        log.info("%s %s/%s: %s", key.plural, key.namespace, key.name, pending)
        return Outcome.RETRY, pending.delay_s
    except StaleStatusError as stale:
        # Somebody wrote the object since it was read; its watch event wakes us too.
        log.info("%s %s/%s: %s", key.plural, key.namespace, key.name, stale)
        return Outcome.RETRY, 0.0
    except Exception:
        log.exception("%s %s/%s: reconcile pass failed", key.plural, key.namespace, key.name)
        return Outcome.FAILED, None
    return (Outcome.SETTLED if settled else Outcome.PROGRESSING), None


class ReconcileLoops:
    def __init__(self, policy: RequeuePolicy, workers: int) -> None:
        self.policy = policy
        self.executor = ThreadPoolExecutor(workers, thread_name_prefix="reconcile")
        self._wakeups: dict[Key, asyncio.Event] = {}
        self._pipeline_of: dict[Key, str] = {}
        self._members: dict[tuple[str, str], set[Key]] = defaultdict(set)
        self._code_of: dict[Key, str] = {}
        self._code_users: dict[tuple[str, str], set[Key]] = defaultdict(set)
        self._pipeline_marks: dict[tuple[str, str], object] = {}

    async def run(
        self,
        key: Key,
        reconcile: Callable[[str, str], bool],
        until_stopped: Callable[[], Awaitable[object]],
    ) -> None:
        """The loop of one object, until ``until_stopped`` resolves (kopf's stop flag:
        the object is gone or peering paused this replica)."""
        wakeup = self._wakeups.setdefault(key, asyncio.Event())
        loop = asyncio.get_running_loop()
        stop = asyncio.ensure_future(until_stopped())
        streak = 0
        try:
            while not stop.done():
                wakeup.clear()
                outcome, asked = await loop.run_in_executor(self.executor, run_pass, reconcile, key)
                streak = 0 if outcome is Outcome.SETTLED else streak + 1
                woken = asyncio.ensure_future(wakeup.wait())
                await asyncio.wait(
                    {woken, stop},
                    timeout=self.policy.delay(outcome, streak, asked),
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if woken.done():
                    streak = 0  # something it reads changed: look now, poll from the start
                woken.cancel()
        finally:
            stop.cancel()
            if self._wakeups.get(key) is wakeup:
                del self._wakeups[key]

    def wake(self, key: Key) -> None:
        wakeup = self._wakeups.get(key)
        if wakeup is not None:
            wakeup.set()

    # -- watch events -----------------------------------------------------------------

    def workload_event(self, key: Key, body: Mapping[str, Any], deleted: bool) -> None:
        spec = body.get("spec") or {}
        pipeline = spec.get("pipeline")
        code = (spec.get("transform") or {}).get("configMap")
        self._index(key, None if deleted else pipeline, None if deleted else code)
        self.wake(key)
        if pipeline:
            self.wake(Key(PIPELINES, key.namespace, pipeline))
            if key.plural == SOURCES:
                for member in self._members.get((key.namespace, pipeline), ()):
                    if member.plural == SPARK_JOBS:
                        self.wake(member)

    def pipeline_event(
        self, namespace: str, name: str, body: Mapping[str, Any], deleted: bool
    ) -> None:
        self.wake(Key(PIPELINES, namespace, name))
        seen = (
            body.get("metadata", {}).get("generation"),
            (body.get("status") or {}).get("exactlyOnce"),
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

    def _index(self, key: Key, pipeline: str | None, code: str | None) -> None:
        before = self._pipeline_of.get(key)
        if before != pipeline:
            if before is not None:
                self._members[(key.namespace, before)].discard(key)
            if pipeline:
                self._pipeline_of[key] = pipeline
                self._members[(key.namespace, pipeline)].add(key)
            else:
                self._pipeline_of.pop(key, None)
        used = self._code_of.get(key)
        if used != code:
            if used is not None:
                self._code_users[(key.namespace, used)].discard(key)
            if code:
                self._code_of[key] = code
                self._code_users[(key.namespace, code)].add(key)
            else:
                self._code_of.pop(key, None)
