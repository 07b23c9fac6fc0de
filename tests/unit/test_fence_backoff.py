"""The fencing backoff: how it grows, and its round trip through both kinds' status."""

from __future__ import annotations

import pytest

from onceflow.api.source import KafkaSourceStatus
from onceflow.api.spark import SparkJobStatus
from onceflow.api.status import FencingStatus
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
