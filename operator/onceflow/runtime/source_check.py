"""Asking a source's system whether the source can run (its connector's ``check``)
before any of its tasks starts: a missing table, privilege, directory or cluster is
reported against the field to fix, and nothing is written to Kafka for a source
that could not have read anything. What only takes exactly-once away (a polling
query pointed at a read replica) refuses a source that requires exactly-once and is
logged for one that merely requests it (``logic.preflight.judge_source_check``)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import TypeVar

from onceflow.api.errors import Problem
from onceflow.api.source import KafkaSourceSpec
from onceflow.logic.preflight import judge_source_check
from onceflow.runtime.plugins import ConnectorLoader, load_connector

log = logging.getLogger(__name__)

SOURCE_SYSTEM_REFUSED = "SourceSystemRefused"
CHECK_DEADLINE_S = 60.0
"""A connector's check runs in the operator, on a reconcile worker: one that never
returns (a source system that accepts a connection and stays silent) must not hold
the worker. The built-in connectors bound their own calls well within it."""

T = TypeVar("T")


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


def source_system_problems(
    spec: KafkaSourceSpec,
    secrets: Mapping[str, str],
    *,
    shares_task_filesystem: bool,
    load: ConnectorLoader = load_connector,
) -> list[Problem]:
    """``spec`` has passed preflight; ``secrets`` is its connector's Secret (or empty)."""
    connector = load(spec.connector.type)
    try:
        found = within(
            CHECK_DEADLINE_S,
            lambda: connector.check(
                spec.connector.config, secrets, shares_task_filesystem=shares_task_filesystem
            ),
        )
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
