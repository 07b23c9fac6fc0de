"""Preflight checks of a KafkaSource against its connector, and of a SparkJob against
its pipeline's mode, before anything starts.

Both the admission webhook and the resource status use these messages, so a user
sees the same words whether ``kubectl apply`` refused the object or the operator
reported it afterwards. Each problem names the field and says how to fix it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from onceflow.api.connector import EXACTLY_ONCE_WAIVER, ConfigProblem, SourceConnector
from onceflow.api.errors import Problem
from onceflow.api.pipeline import ExactlyOnceMode
from onceflow.api.source import ExactlyOnceSupport, KafkaSourceSpec, TransactionBoundary
from onceflow.api.spark import KafkaDelivery, SparkJobSpec


def preflight_source(spec: KafkaSourceSpec, connector: SourceConnector) -> list[Problem]:
    """Every reason the source cannot run as specified; empty when it can."""
    config = spec.connector.config
    problems = [
        Problem(f"spec.connector.config.{p.field}", p.message) for p in connector.validate(config)
    ]
    if problems:
        # The capability questions below are only meaningful for a valid config.
        return problems
    if spec.exactly_once_support is ExactlyOnceSupport.REQUIRED and not (
        connector.exactly_once_support(config)
    ):
        why = connector.exactly_once_refusal(config)
        problems.append(
            Problem(
                "spec.exactlyOnceSupport",
                f"required, but connector {spec.connector.type!r} does not declare "
                "exactly-once support for this config"
                + (f" ({why})" if why else "")
                + "; set exactlyOnceSupport: requested to run it at-least-once, or use a "
                "connector that can resume exactly",
            )
        )
    if spec.transaction_boundary is TransactionBoundary.CONNECTOR and not (
        connector.can_define_transaction_boundaries(config)
    ):
        problems.append(
            Problem(
                "spec.transactionBoundary",
                f"connector {spec.connector.type!r} cannot define transaction boundaries; "
                "use poll or interval",
            )
        )
    return problems


@dataclass(frozen=True)
class SourceCheckVerdict:
    """What a connector's ``check`` found, judged against the source's
    ``exactlyOnceSupport``."""

    refusals: tuple[ConfigProblem, ...]
    """Each keeps every task of a new generation from starting."""
    waived: tuple[ConfigProblem, ...] = ()
    """Problems that stand only in the way of exactly-once, which the source merely
    requested: it runs without it, as under a config the connector declares no support
    for (``preflight_source``), and the caller says so in its log."""


def judge_source_check(
    support: ExactlyOnceSupport, found: Sequence[ConfigProblem]
) -> SourceCheckVerdict:
    """``found``: the connector's ``check`` of a config that passed preflight. Under
    ``required`` every problem refuses, and one that only takes exactly-once away says
    which setting trades it for running (the connector's own message names the fix in
    the source system); under ``requested`` such a problem is waived."""
    if support is ExactlyOnceSupport.REQUIRED:
        return SourceCheckVerdict(
            tuple(
                replace(p, message=f"{p.message}; {EXACTLY_ONCE_WAIVER}")
                if p.exactly_once_only
                else p
                for p in found
            )
        )
    return SourceCheckVerdict(
        refusals=tuple(p for p in found if not p.exactly_once_only),
        waived=tuple(p for p in found if p.exactly_once_only),
    )


def at_least_once_sink_problem(
    spec: SparkJobSpec, pipeline: str, mode: ExactlyOnceMode
) -> Problem | None:
    """Spark's own Kafka sink can duplicate on retries: refused outside ``disabled``."""
    kafka = spec.sink.kafka
    if (
        mode is ExactlyOnceMode.DISABLED
        or kafka is None
        or kafka.delivery is not KafkaDelivery.AT_LEAST_ONCE
    ):
        return None
    return Problem(
        "spec.sink.kafka.delivery",
        f"atLeastOnce (Spark's built-in Kafka sink) cannot be exactly-once while Pipeline "
        f"{pipeline!r} is {mode}; use delivery: exactlyOnce",
        "AtLeastOnceSink",
    )
