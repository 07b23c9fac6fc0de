"""The fencing backoff: how it grows, when fencing is tried, and its round trip through
both kinds' status."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from onceflow.api.source import KafkaSourceStatus
from onceflow.api.spark import SparkJobStatus
from onceflow.api.status import FencingStatus
from onceflow.control.errors import RetryLaterError
from onceflow.control.fencing import fence_with_backoff
from onceflow.eos.fencing import FenceResult, FencingReport
from onceflow.logic.fence_backoff import (
    FENCE_BACKOFF_S,
    FenceFailures,
    fence_failures,
    with_fence_failures,
)


def test_the_backoff_grows_to_its_cap_and_says_how_long_to_wait() -> None:
    failures, now = FenceFailures(), 1_000.0
    delays = []
    for _ in range(len(FENCE_BACKOFF_S) + 2):
        failures = failures.after_failure(now)
        delays.append(failures.wait_s(now))
    assert delays == [*FENCE_BACKOFF_S, FENCE_BACKOFF_S[-1], FENCE_BACKOFF_S[-1]]
    assert failures.wait_s(failures.retry_at + 1) == 0.0, "due: fence now"
    assert FenceFailures().wait_s(now) == 0.0, "no failure: no wait"


@pytest.mark.parametrize("kind", [KafkaSourceStatus, SparkJobStatus])
def test_the_backoff_survives_in_either_kinds_status(kind: type[FencingStatus]) -> None:
    failures = FenceFailures().after_failure(now=1_800_000_000.0).after_failure(1_800_000_001.0)
    status = with_fence_failures(kind(), failures)
    assert status.fence_failures == 2 and status.fence_retry_at == "2027-01-15T08:00:03Z"
    assert status.to_wire()["fenceRetryAt"] == "2027-01-15T08:00:03Z", "as the CRD names it"
    assert fence_failures(status) == failures, "read back as it was written"
    cleared = with_fence_failures(status, None)
    assert cleared.fence_failures is None and fence_failures(cleared) == FenceFailures()


def test_a_retry_time_in_status_is_never_earlier_than_the_backoff() -> None:
    failures = FenceFailures().after_failure(now=1_800_000_000.4)
    status = with_fence_failures(KafkaSourceStatus(), failures)
    assert fence_failures(status).retry_at >= failures.retry_at


def _failing(clock: list[float], takes_s: float) -> Callable[[], FencingReport]:
    def fence() -> FencingReport:
        clock[0] += takes_s
        return FencingReport((FenceResult("p/source/s/0", takes_s, "timed out"),))

    return fence


def test_the_backoff_counts_from_the_failure_not_from_the_attempt() -> None:
    """A fence that timed out (30 s) has outlived the first backoff steps: counted from
    the attempt, the next try would come at once."""
    clock, recorded = [1_000.0], []
    with pytest.raises(RetryLaterError) as pending:
        fence_with_backoff(
            _failing(clock, 30.0),
            FenceFailures(),
            lambda message, failures: recorded.append((message, failures)),
            "nothing starts",
            "KafkaSource",
            clock=lambda: clock[0],
        )
    ((message, failures),) = recorded
    assert failures == FenceFailures(1, 1_031.0), "one second after the failure"
    assert pending.value.delay_s == 1.0 and "retrying in 1s" in message


def test_fencing_waits_for_the_recorded_backoff_before_trying() -> None:
    clock, attempts = [1_000.0], []

    def fence() -> FencingReport:
        attempts.append(clock[0])
        return FencingReport(())

    with pytest.raises(RetryLaterError) as pending:
        fence_with_backoff(
            fence, FenceFailures(3, 1_004.0), print, "x", "SparkJob", clock=lambda: clock[0]
        )
    assert attempts == [] and pending.value.delay_s == 4.0
    clock[0] = 1_004.0
    assert fence_with_backoff(
        fence, FenceFailures(3, 1_004.0), print, "x", "SparkJob", clock=lambda: clock[0]
    ).ok
    assert attempts == [1_004.0]
