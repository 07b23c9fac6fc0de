"""The operator's own Prometheus metrics: how its passes end and how long they take,
fencing, rollout steps, generations, and how many objects stand in each condition.

Labels stay few and bounded (kind, outcome, mode, condition): per-object state is in
each object's status, and a series per object would grow with every tenant's source.
Everything is measured in this process, so an operator restart starts the counters
over and forgets a rollout step in flight (Prometheus' ``rate`` and ``increase`` are
made for the first; the second loses one sample).
"""

from __future__ import annotations

import time
from collections import Counter as Tally
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from prometheus_client import Counter, Gauge, Histogram, start_http_server

from onceflow.api.pipeline import ExactlyOnceMode
from onceflow.api.status import Condition
from onceflow.logic.requeue import Outcome
from onceflow.logic.rollout import RolloutDecision

KINDS = {"kafkasources": "KafkaSource", "sparkjobs": "SparkJob", "pipelines": "Pipeline"}

RECONCILES = Counter(
    "onceflow_operator_reconciles",
    "Reconcile passes, by kind and how they ended (settled, progressing, retry, failed)",
    ["kind", "outcome"],
)
RECONCILE_SECONDS = Histogram(
    "onceflow_operator_reconcile_seconds",
    "Time of one reconcile pass (fencing and status writes included)",
    ["kind"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
FENCING_SECONDS = Histogram(
    "onceflow_operator_fencing_seconds",
    "Time to fence one step's transactional ids (all of them, in parallel)",
    ["kind"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
FENCING_FAILURES = Counter(
    "onceflow_operator_fencing_failures",
    "Fencing attempts that did not fence every id (retried with backoff)",
    ["kind"],
)
GENERATIONS = Counter(
    "onceflow_operator_generations",
    "Source task generations planned (a spec change, a mode step, a resize)",
)
ROLLOUT_STEPS = Counter(
    "onceflow_operator_rollout_steps",
    "Pipeline rollout steps taken, by the mode stepped to",
    ["to"],
)
ROLLOUT_STEP_SECONDS = Histogram(
    "onceflow_operator_rollout_step_seconds",
    "From a Pipeline stepping to a mode until every workload runs it, ready",
    ["to"],
    buckets=(1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600),
)
HANGING = Gauge(
    "onceflow_operator_hanging_partitions",
    "Partitions of the watched Pipelines whose last stable offset an open transaction "
    "has held for longer than its writers may keep one (each Pipeline names them in "
    "its Degraded condition)",
)
OBJECTS = Gauge(
    "onceflow_operator_objects",
    "Objects by kind and condition status (Ready, Progressing, Degraded, DeliveryGuarantee)",
    ["kind", "condition", "status"],
)


def serve(port: int) -> None:
    """Serves /metrics; the kinds' fencing failures start at zero, so an alert on their
    rate has a series before the first failure."""
    for kind in ("KafkaSource", "SparkJob"):
        FENCING_FAILURES.labels(kind=kind)
    if port:
        start_http_server(port)


def count_pass(plural: str, outcome: Outcome, seconds: float) -> None:
    kind = KINDS.get(plural, plural)
    RECONCILES.labels(kind=kind, outcome=outcome.value).inc()
    RECONCILE_SECONDS.labels(kind=kind).observe(seconds)


@contextmanager
def timed_fencing(kind: str) -> Iterator[None]:
    started = time.monotonic()
    try:
        yield
    finally:
        FENCING_SECONDS.labels(kind=kind).observe(time.monotonic() - started)


def fencing_failed(kind: str) -> None:
    FENCING_FAILURES.labels(kind=kind).inc()


def generation_planned() -> None:
    GENERATIONS.inc()


ObjectKey = tuple[str, str, str]


class ConditionCounts:
    """How many objects of each kind stand in each condition status, kept from the
    statuses this operator writes (each one replaces the object's last) and the
    deletions it sees."""

    def __init__(self) -> None:
        self._last: dict[ObjectKey, tuple[tuple[str, str], ...]] = {}
        self._tally: Tally[tuple[str, str, str]] = Tally()

    def written(
        self, plural: str, namespace: str, name: str, conditions: Sequence[Condition]
    ) -> None:
        kind = KINDS.get(plural, plural)
        now = tuple(sorted((c.type.value, c.status.value) for c in conditions))
        self._replace((plural, namespace, name), kind, now)

    def deleted(self, plural: str, namespace: str, name: str) -> None:
        self._replace((plural, namespace, name), KINDS.get(plural, plural), ())

    def _replace(self, key: ObjectKey, kind: str, now: tuple[tuple[str, str], ...]) -> None:
        before = self._last.pop(key, ())
        if now:
            self._last[key] = now
        for condition, status in before:
            self._tally[(kind, condition, status)] -= 1
        for condition, status in now:
            self._tally[(kind, condition, status)] += 1
        for labels in {(kind, c, s) for c, s in (*before, *now)}:
            OBJECTS.labels(*labels).set(self._tally[labels])


CONDITIONS = ConditionCounts()


class RolloutSteps:
    """Times each Pipeline's step from the pass that takes it to the pass that finds
    every workload ready in the mode it stepped to."""

    def __init__(self) -> None:
        self._started: dict[tuple[str, str], tuple[ExactlyOnceMode, float]] = {}

    def passed(
        self, key: tuple[str, str], current: ExactlyOnceMode, decision: RolloutDecision
    ) -> None:
        """``current``: the mode the pass began in; ``decision``: what it wrote."""
        started = self._started.get(key)
        if started is not None and started[0] is current and not decision.waiting_for:
            seconds = time.monotonic() - started[1]
            ROLLOUT_STEP_SECONDS.labels(to=current.value).observe(seconds)
            del self._started[key]
        if decision.advanced:
            ROLLOUT_STEPS.labels(to=decision.current.value).inc()
            self._started[key] = (decision.current, time.monotonic())

    def forget(self, key: tuple[str, str]) -> None:
        self._started.pop(key, None)


class HangingCounts:
    """The hanging partitions each Pipeline's last pass found, summed."""

    def __init__(self) -> None:
        self._found: dict[tuple[str, str], int] = {}

    def found(self, key: tuple[str, str], count: int) -> None:
        self._found[key] = count
        HANGING.set(sum(self._found.values()))

    def forget(self, key: tuple[str, str]) -> None:
        self._found.pop(key, None)
        HANGING.set(sum(self._found.values()))
