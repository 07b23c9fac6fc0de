"""The delivery guarantee a Pipeline gives end to end, and why: ``spec.exactlyOnce`` is
what the user asked for, and what actually holds is the weakest of its stages.

A stage is weak when its records can arrive more than once: a workload below mode
``enabled`` (sources write without transactions, a Spark job's Kafka sink is Spark's
own), a source whose connector declares no exactly-once support for its config (it
runs, because ``exactlyOnceSupport`` only requested it), a Kafka sink set to
``atLeastOnce``, and a Spark job reading such a source without ``spec.dedup`` (dedup by
record id is the one thing that makes an at-least-once input exact again). Each is
named with its reason, so ``kubectl get pipelines`` answers "is this exactly-once?" and
the condition's message says which stage to fix.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from onceflow.api.pipeline import ExactlyOnceMode, WorkloadState


class Guarantee(StrEnum):
    EXACTLY_ONCE = "ExactlyOnce"
    AT_LEAST_ONCE = "AtLeastOnce"
    UNKNOWN = "Unknown"
    """A workload has not said yet which mode it runs, or there is none."""


@dataclass(frozen=True)
class SourceStage:
    name: str
    mode: ExactlyOnceMode | None
    """The mode its running generation was fenced in; None before it reported one."""
    unsupported: str | None = None
    """Why its connector cannot resume exactly under its config, when it cannot."""
    state: WorkloadState = WorkloadState.RUNNING
    """As recorded in its status: a paused or stopped stage loses and repeats nothing,
    but nothing flows through it either, and the message says so."""


@dataclass(frozen=True)
class JobStage:
    name: str
    mode: ExactlyOnceMode | None
    """The mode its driver reported; None before it did."""
    sources: tuple[str, ...] = ()
    """The pipeline's sources it reads (``spec.input.sources``)."""
    dedup: bool = False
    at_least_once_sink: bool = False
    """``spec.sink.kafka.delivery: atLeastOnce`` (Spark's own Kafka sink)."""
    state: WorkloadState = WorkloadState.RUNNING


@dataclass(frozen=True)
class GuaranteeVerdict:
    guarantee: Guarantee
    message: str


def judge_delivery(
    current: ExactlyOnceMode,
    target: ExactlyOnceMode,
    sources: Sequence[SourceStage],
    jobs: Sequence[JobStage],
) -> GuaranteeVerdict:
    """The weakest stage decides. ``current``/``target``: the Pipeline's rollout, whose
    mode below ``enabled`` weakens every workload at once (named once, not per
    workload)."""
    weak: list[str] = []
    unknown: list[str] = []
    if current is not ExactlyOnceMode.ENABLED:
        toward = f", on its way to {target.value}" if target is not current else ""
        weak.append(
            f"the Pipeline runs mode {current.value}{toward}: sources write without transactions"
        )
    stages: list[tuple[str, ExactlyOnceMode | None]] = [
        *((f"KafkaSource {s.name}", s.mode) for s in sources),
        *((f"SparkJob {j.name}", j.mode) for j in jobs),
    ]
    for label, mode in stages:
        if mode is None:
            unknown.append(f"{label} has not reported the mode it runs yet")
        elif mode is not ExactlyOnceMode.ENABLED and mode is not current:
            weak.append(f"{label} still runs mode {mode.value}")
    weak_sources = {s.name for s in sources if s.unsupported}
    weak += [
        f"KafkaSource {s.name}: its connector cannot resume exactly ({s.unsupported}), and "
        "spec.exactlyOnceSupport is requested, so it runs at-least-once"
        for s in sources
        if s.unsupported
    ]
    for job in jobs:
        if job.at_least_once_sink:
            weak.append(f"SparkJob {job.name}: spec.sink.kafka.delivery is atLeastOnce")
        repeated = sorted(set(job.sources) & weak_sources)
        if repeated and not job.dedup:
            weak.append(
                f"SparkJob {job.name} reads {', '.join(repeated)}, which may repeat records, "
                "without spec.dedup"
            )
    held = [
        f"{label} is {state.value}: nothing flows through it until it runs again"
        for label, state in (
            *((f"KafkaSource {s.name}", s.state) for s in sources),
            *((f"SparkJob {j.name}", j.state) for j in jobs),
        )
        if state is not WorkloadState.RUNNING
    ]
    if weak:
        return GuaranteeVerdict(Guarantee.AT_LEAST_ONCE, "; ".join(weak + held))
    if unknown:
        return GuaranteeVerdict(Guarantee.UNKNOWN, "; ".join(unknown + held))
    if not stages:
        return GuaranteeVerdict(Guarantee.UNKNOWN, "the Pipeline has no workloads")
    return GuaranteeVerdict(
        Guarantee.EXACTLY_ONCE,
        "; ".join(
            [
                f"every workload runs mode enabled: {len(sources)} source(s) and {len(jobs)} "
                "Spark job(s), each exactly-once",
                *held,
            ]
        ),
    )
