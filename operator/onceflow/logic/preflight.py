"""Preflight checks of a KafkaSource against its connector, and of a SparkJob against
its pipeline's mode, before anything starts.

Both the admission webhook and the resource status use these messages, so a user
sees the same words whether ``kubectl apply`` refused the object or the operator
reported it afterwards. Each problem names the field and says how to fix it.
"""

from __future__ import annotations

from onceflow.api.connector import SourceConnector
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
