"""Preflight checks of a KafkaSource against its connector, before any task starts.

Both the admission webhook and the resource status use these messages, so a user
sees the same words whether ``kubectl apply`` refused the object or the operator
reported it afterwards. Each problem names the field and says how to fix it.
"""

from __future__ import annotations

from onceflow.api.connector import SourceConnector
from onceflow.api.source import ExactlyOnceSupport, KafkaSourceSpec, TransactionBoundary

Problem = tuple[str, str]


def preflight_source(spec: KafkaSourceSpec, connector: SourceConnector) -> list[Problem]:
    """Every reason the source cannot run as specified; empty when it can."""
    config = spec.connector.config
    problems: list[Problem] = [
        (f"spec.connector.config.{p.field}", p.message) for p in connector.validate(config)
    ]
    if problems:
        # The capability questions below are only meaningful for a valid config.
        return problems
    if spec.exactly_once_support is ExactlyOnceSupport.REQUIRED and not (
        connector.exactly_once_support(config)
    ):
        problems.append(
            (
                "spec.exactlyOnceSupport",
                f"required, but connector {spec.connector.type!r} does not declare "
                "exactly-once support for this config; set exactlyOnceSupport: requested "
                "to run it at-least-once, or use a connector that can resume exactly",
            )
        )
    if spec.transaction_boundary is TransactionBoundary.CONNECTOR and not (
        connector.can_define_transaction_boundaries(config)
    ):
        problems.append(
            (
                "spec.transactionBoundary",
                f"connector {spec.connector.type!r} cannot define transaction boundaries; "
                "use poll or interval",
            )
        )
    return problems
