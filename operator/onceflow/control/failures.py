"""A reconcile pass that fails, as its object's status and events say it.

Without this, an exception that leaves a pass is a traceback in the operator's log
while the object keeps saying Progressing: in ``kubectl get`` and in Argo CD it waits
forever for something that will never happen (a pod create the API refuses, a Secret
that is not there, a client setting librdkafka rejects). A failure that will not go
away by itself is written as Degraded with a reason and a message naming what to fix,
and a Warning event; one that will (a conflict, an API server or broker briefly
away) is only retried, so a blip never flips a healthy object's conditions.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from confluent_kafka import KafkaException
from kubernetes.client.exceptions import ApiException
from pydantic import ValidationError
from urllib3.exceptions import HTTPError as TransportError

from onceflow.api.errors import problems_from
from onceflow.api.status import Condition
from onceflow.control.errors import InvalidWorkloadError, RetryLaterError
from onceflow.control.kube import HTTP_FORBIDDEN, KubeClient, Obj, StaleStatusError
from onceflow.control.operator_metrics import CONDITIONS
from onceflow.logic.conditions import newly_degraded

log = logging.getLogger(__name__)

# Answers that mean "try again": the request raced another writer, or the server was
# busy or away.
TRANSIENT_HTTP = frozenset({409, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class Failure:
    reason: str
    message: str


class ReportedFailureError(Exception):
    """A pass failed and its object's status says so; the loop backs off and retries."""

    def __init__(self, failure: Failure, unexpected: bool) -> None:
        super().__init__(f"{failure.reason}: {failure.message}")
        self.failure = failure
        self.unexpected = unexpected
        """Not a failure the operator knows: its traceback belongs in the log."""


def _api_message(error: ApiException) -> str:
    try:
        return str(json.loads(error.body or "{}").get("message") or error.reason)
    except (ValueError, AttributeError):
        return str(error.reason)


def _api_failure(error: ApiException) -> Failure | None:
    if error.status in TRANSIENT_HTTP or error.status is None:
        return None
    message = _api_message(error)
    if error.status == HTTP_FORBIDDEN:
        return Failure(
            "Forbidden",
            f"the API server refused a request: {message}; fix what refuses it (the "
            "operator's RBAC, the namespace's Pod Security level, an admission policy, a "
            "ResourceQuota)",
        )
    answer = f"{error.status} {error.reason}"
    return Failure(f"ApiError{error.status}", f"the API server answered {answer}: {message}")


def _kafka_failure(error: KafkaException) -> Failure | None:
    kafka_error = error.args[0]
    if kafka_error.retriable():
        return None
    return Failure(
        "KafkaClientError",
        f"the operator's Kafka client failed: {kafka_error.str()}; check the Pipeline's "
        "spec.kafka (bootstrapServers, the authSecretRef Secret's settings)",
    )


def describe_failure(error: Exception) -> Failure | None:
    """What status says about ``error``; None for a failure that passes by itself."""
    if isinstance(error, ApiException):
        return _api_failure(error)
    if isinstance(error, KafkaException):
        return _kafka_failure(error)
    if isinstance(error, ValidationError):
        problems = "; ".join(map(str, problems_from(error)))
        return Failure("InvalidSpec", f"{error.title} is invalid: {problems}")
    if isinstance(error, (TransportError, OSError)):
        return None
    return Failure(
        "ReconcileError",
        f"{type(error).__name__}: {error}; the operator retries with backoff (its log has "
        "the details)",
    )


Degrade = Callable[[Obj, str, str], object]
"""Writes (object, reason, message) as Degraded in the object's status."""


def reporting_failures(
    run: Callable[[], bool], latest: Callable[[], Obj | None], degrade: Degrade
) -> bool:
    """Runs one pass. An invalid workload is degraded and answers "not settled"; any
    other lasting failure is degraded too, then raised as ``ReportedFailureError`` so the
    loop backs off. The status is written on the ``latest`` object (the pass may have
    written since it read), if it still exists."""

    def report(reason: str, message: str) -> None:
        obj = latest()
        if obj is not None:
            degrade(obj, reason, message)

    try:
        return run()
    except (RetryLaterError, StaleStatusError):
        raise
    except InvalidWorkloadError as invalid:
        report(invalid.reason, str(invalid))
        return False
    except Exception as error:
        failure = describe_failure(error)
        if failure is None:
            raise
        try:
            report(failure.reason, failure.message)
        except Exception:
            log.exception("could not report %s in status", failure.reason)
        raise ReportedFailureError(failure, failure.reason == "ReconcileError") from error


def write_status(
    kube: KubeClient,
    plural: str,
    obj: Obj,
    wire: Obj,
    before: Sequence[Condition],
    after: Sequence[Condition],
) -> Obj:
    """Writes a status (``before`` and ``after``: its conditions); a Degraded that turns
    true or changes its reason also goes out as a Warning event."""
    news = newly_degraded(before, after)
    written = kube.replace_status(plural, obj, wire)
    meta = obj["metadata"]
    CONDITIONS.written(plural, meta["namespace"], meta["name"], after)
    if news is not None:
        kube.event(written, news.reason, news.message, warning=True)
    return written
