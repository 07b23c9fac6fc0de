"""The delivery guarantee a Pipeline states (logic/delivery_guarantee.py): every
combination of the rollout's mode, a source's connector support, a Spark job's sink and
its dedup, with the guarantee that holds and the words that say why."""

from __future__ import annotations

from dataclasses import replace

import pytest

from onceflow.api.pipeline import ExactlyOnceMode, WorkloadState
from onceflow.logic.delivery_guarantee import Guarantee, JobStage, SourceStage, judge_delivery

ENABLED, PREPARING, DISABLED = (
    ExactlyOnceMode.ENABLED,
    ExactlyOnceMode.PREPARING,
    ExactlyOnceMode.DISABLED,
)
WHY = "mode timestamp+incrementing re-reads updated rows"


def _source(mode: ExactlyOnceMode | None = ENABLED, unsupported: str | None = None) -> SourceStage:
    return SourceStage("orders", mode, unsupported)


def _job(
    mode: ExactlyOnceMode | None = ENABLED, *, dedup: bool = False, spark_sink: bool = False
) -> JobStage:
    return JobStage("copier", mode, ("orders",), dedup=dedup, at_least_once_sink=spark_sink)


CASES = [
    # (rollout current, target, source, job, guarantee, words in the message)
    (ENABLED, ENABLED, _source(), _job(), Guarantee.EXACTLY_ONCE, "every workload"),
    (ENABLED, ENABLED, _source(), None, Guarantee.EXACTLY_ONCE, "1 source(s) and 0"),
    (DISABLED, DISABLED, _source(DISABLED), _job(DISABLED), Guarantee.AT_LEAST_ONCE,
     "the Pipeline runs mode disabled: sources write without transactions"),
    (PREPARING, ENABLED, _source(PREPARING), _job(PREPARING), Guarantee.AT_LEAST_ONCE,
     "mode preparing, on its way to enabled"),
    (PREPARING, DISABLED, _source(PREPARING), _job(PREPARING), Guarantee.AT_LEAST_ONCE,
     "mode preparing, on its way to disabled"),
    # A workload behind the rollout is named on its own.
    (ENABLED, ENABLED, _source(), _job(PREPARING), Guarantee.AT_LEAST_ONCE,
     "SparkJob copier still runs mode preparing"),
    # Requested exactly-once from a connector that cannot resume exactly.
    (ENABLED, ENABLED, _source(unsupported=WHY), None, Guarantee.AT_LEAST_ONCE,
     f"KafkaSource orders: its connector cannot resume exactly ({WHY})"),
    (ENABLED, ENABLED, _source(unsupported=WHY), _job(), Guarantee.AT_LEAST_ONCE,
     "SparkJob copier reads orders, which may repeat records, without spec.dedup"),
    # Dedup makes the job's output exact again; the source's own topic still repeats.
    (ENABLED, ENABLED, _source(unsupported=WHY), _job(dedup=True), Guarantee.AT_LEAST_ONCE,
     "KafkaSource orders: its connector cannot resume exactly"),
    (DISABLED, DISABLED, _source(DISABLED), _job(DISABLED, spark_sink=True),
     Guarantee.AT_LEAST_ONCE, "SparkJob copier: spec.sink.kafka.delivery is atLeastOnce"),
    # Not reported yet: unknown, unless something already makes it at-least-once.
    (ENABLED, ENABLED, _source(None), _job(), Guarantee.UNKNOWN,
     "KafkaSource orders has not reported the mode it runs yet"),
    (DISABLED, DISABLED, _source(None), _job(DISABLED), Guarantee.AT_LEAST_ONCE,
     "the Pipeline runs mode disabled"),
    (ENABLED, ENABLED, None, None, Guarantee.UNKNOWN, "the Pipeline has no workloads"),
    # Held stages lose and repeat nothing, and are named: nothing flows through them.
    (ENABLED, ENABLED, replace(_source(), state=WorkloadState.STOPPED), _job(),
     Guarantee.EXACTLY_ONCE, "KafkaSource orders is stopped: nothing flows through it"),
    (ENABLED, ENABLED, _source(), replace(_job(), state=WorkloadState.PAUSED),
     Guarantee.EXACTLY_ONCE, "SparkJob copier is paused"),
    (DISABLED, DISABLED, _source(DISABLED), replace(_job(DISABLED), state=WorkloadState.PAUSED),
     Guarantee.AT_LEAST_ONCE, "sources write without transactions; SparkJob copier is paused"),
]  # fmt: skip


@pytest.mark.parametrize(("current", "target", "source", "job", "guarantee", "says"), CASES)
def test_the_weakest_stage_decides_and_is_named(
    current: ExactlyOnceMode,
    target: ExactlyOnceMode,
    source: SourceStage | None,
    job: JobStage | None,
    guarantee: Guarantee,
    says: str,
) -> None:
    verdict = judge_delivery(current, target, [source] if source else [], [job] if job else [])
    assert verdict.guarantee is guarantee, verdict
    assert says in verdict.message, verdict.message


def test_dedup_keeps_the_job_out_of_the_reasons() -> None:
    verdict = judge_delivery(ENABLED, ENABLED, [_source(unsupported=WHY)], [_job(dedup=True)])
    assert "SparkJob copier" not in verdict.message, verdict.message


def test_a_job_reading_only_exact_sources_is_not_blamed_for_another_sources_repeats() -> None:
    other = SourceStage("refunds", ENABLED, WHY)
    verdict = judge_delivery(ENABLED, ENABLED, [_source(), other], [_job()])
    assert verdict.guarantee is Guarantee.AT_LEAST_ONCE
    assert "KafkaSource refunds" in verdict.message
    assert "SparkJob copier" not in verdict.message, verdict.message
