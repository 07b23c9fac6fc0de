"""Asking a source's system whether the source can run (its connector's ``check``)
before any of its tasks starts: a missing table, privilege, directory or cluster is
reported against the field to fix, and nothing is written to Kafka for a source
that could not have read anything. What only takes exactly-once away (a polling
query pointed at a read replica) refuses a source that requires exactly-once and is
logged for one that merely requests it (``api.check_verdict.judge_source_check``).

Beside the connectors rather than in the task process (``onceflow.runtime``): the
operator, its webhook, ``onceflow run`` and ``onceflow render`` ask before any task
runs, and none of them needs the task process to do so."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from onceflow.api.check_verdict import judge_source_check
from onceflow.api.connector import ConfigProblem
from onceflow.api.errors import Problem
from onceflow.api.source import KafkaSourceSpec
from onceflow.connectors.registry import ConnectorLoader, load_connector

log = logging.getLogger(__name__)

SOURCE_SYSTEM_REFUSED = "SourceSystemRefused"
CHECK_DEADLINE_S = 60.0
"""A connector's check or measurement that has not answered in this long counts as
failed: a source system that accepts a connection and stays silent must not keep a
source waiting for ever. The built-in connectors bound their own calls well within it."""
SOURCE_SYSTEM_WORKERS = 4
"""Threads the operator gives calls into source systems. They are not the reconcile
workers: eight silent databases once held all eight of those, and every tenant's
reconciles and finalizers stopped. Now they can hold these four, and only checks wait."""

ANSWER_WITHIN_S = 0.2
"""How long the asking pass waits for the answer before it moves on: a system that
answers quickly (most do) is answered in the same pass, where the answer otherwise
came a queued pass later (under a burst of 50 spec changes, seconds later)."""

QUEUED_DEADLINES = 10
"""A call still waiting for a thread after this many deadlines is given up."""

T = TypeVar("T")


class StillAskingError(Exception):
    """The source system has not answered yet; ask again on a later pass."""


def within(seconds: float, call: Callable[[], T]) -> T:
    """``call()``'s result, or TimeoutError once ``seconds`` passed; the call goes on in
    a daemon thread, which a connector bounding its own calls ends soon after."""
    result: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            result.append(call())
        except BaseException as error:  # handed to the caller's thread
            failure.append(error)

    worker = threading.Thread(target=run, name="source-check", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise TimeoutError(f"no answer within {seconds} s")
    if failure:
        raise failure[0]
    return result[0]


@dataclass
class SourceSystemCalls:
    """Calls into tenants' source systems on threads of their own, so that a reconcile
    pass asks and moves on instead of waiting: the first ``answer`` for a key starts
    the call and, unless it answers within ``answer_within_s`` on a thread that was
    free, raises ``StillAskingError``; a later one returns its result (or raises
    what it raised, or TimeoutError once the call has run ``deadline_s``). The deadline
    runs from the call's start, not from the question: a call queued behind slow ones
    (another tenant's silent systems holding every thread) is not failed for their
    slowness; only one queued ten deadlines long is. Each answer is handed out once;
    the next ``answer`` for the key asks again."""

    workers: int = SOURCE_SYSTEM_WORKERS
    deadline_s: float = CHECK_DEADLINE_S
    answer_within_s: float = ANSWER_WITHIN_S
    clock: Callable[[], float] = time.monotonic
    _pool: ThreadPoolExecutor = field(init=False)
    _asked: dict[Hashable, tuple[float, Future[Any]]] = field(init=False, default_factory=dict)
    _began: dict[Hashable, float] = field(init=False, default_factory=dict)
    _running: int = field(init=False, default=0)
    _lock: threading.Lock = field(init=False, default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="source-system")

    def answer(
        self,
        key: Hashable,
        call: Callable[[], T],
        then: Callable[[Future[T]], None] | None = None,
    ) -> T:
        """``then``: called with the finished call (on its thread) once the answer is
        there, so that the asker can come back for it at once rather than at its next
        poll; not called for an answer given within ``answer_within_s``."""
        with self._lock:
            now = self.clock()
            self._forget_unclaimed(now)
            asked = self._asked.get(key)
            if asked is not None:
                since, pending = asked
                return self._taken(key, now, since, cast("Future[T]", pending))
            # Waited for only when a thread is free to run it: behind silent systems
            # holding every thread, the wait would buy nothing and cost a worker.
            starts_now = self._running < self.workers
            future = self._pool.submit(self._timed, key, call)
            self._asked[key] = (now, future)
        if starts_now:
            wait((future,), self.answer_within_s)
        if not future.done():
            if then is not None:
                future.add_done_callback(then)
            raise StillAskingError(key)
        with self._lock:
            if self._asked.get(key, (now, None))[1] is future:
                self._forget(key)
        return future.result()

    def _taken(self, key: Hashable, now: float, since: float, future: Future[T]) -> T:
        """The answer to a question asked on an earlier pass (the lock held)."""
        if not future.done():
            began = self._began.get(key)
            running_too_long = began is not None and now - began >= self.deadline_s
            if not running_too_long and now - since < QUEUED_DEADLINES * self.deadline_s:
                raise StillAskingError(key)
            future.cancel()  # a queued call never starts; a running one ends on its bound
            self._forget(key)
            raise TimeoutError(f"no answer within {self.deadline_s:.0f} s")
        self._forget(key)
        return future.result()

    def _timed(self, key: Hashable, call: Callable[[], T]) -> T:
        with self._lock:
            self._began[key] = self.clock()
            self._running += 1
        try:
            return call()
        finally:
            with self._lock:
                self._running -= 1

    def _forget(self, key: Hashable) -> None:
        self._asked.pop(key, None)
        self._began.pop(key, None)

    def _forget_unclaimed(self, now: float) -> None:
        """Answers nobody came back for (a source deleted or edited meanwhile)."""
        stale = [
            k
            for k, (since, _) in self._asked.items()
            if now - since > 2 * QUEUED_DEADLINES * self.deadline_s
        ]
        for key in stale:
            self._forget(key)


def source_system_problems(
    spec: KafkaSourceSpec,
    secrets: Mapping[str, str],
    *,
    shares_task_filesystem: bool,
    load: ConnectorLoader = load_connector,
    ask: Callable[[Callable[[], list[ConfigProblem]]], list[ConfigProblem]] | None = None,
) -> list[Problem]:
    """``spec`` has passed preflight; ``secrets`` is its connector's Secret (or empty).
    ``ask``: how the check is run (``SourceSystemCalls.answer`` with a key, which may
    raise ``StillAskingError``); by default, here and now within the deadline."""
    connector = load(spec.connector.type)

    def check() -> list[ConfigProblem]:
        return connector.check(
            spec.connector.config, secrets, shares_task_filesystem=shares_task_filesystem
        )

    try:
        found = ask(check) if ask else within(CHECK_DEADLINE_S, check)
    except StillAskingError:
        raise
    except TimeoutError:
        return [
            Problem(
                "spec.connector",
                f"the {spec.connector.type} connector's check did not finish within "
                f"{CHECK_DEADLINE_S:.0f} s: the source system accepts connections but does "
                "not answer; check spec.connector.config",
                reason=SOURCE_SYSTEM_REFUSED,
            )
        ]
    except Exception as error:  # a connector's bug must not pass for "no problem"
        return [
            Problem(
                "spec.connector",
                f"the {spec.connector.type} connector's check failed: {error!r}",
                reason=SOURCE_SYSTEM_REFUSED,
            )
        ]
    verdict = judge_source_check(spec.exactly_once_support, found)
    for waived in verdict.waived:
        log.warning(
            "spec.connector.config.%s: %s; the source runs without exactly-once "
            "(spec.exactlyOnceSupport is requested)",
            waived.field,
            waived.message,
        )
    return [
        Problem(f"spec.connector.config.{p.field}", p.message, reason=SOURCE_SYSTEM_REFUSED)
        for p in verdict.refusals
    ]
