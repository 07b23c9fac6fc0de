"""The backoff after failed fencing, and its record in a status.

Fencing fails when a broker or an ACL is missing: retrying at once would hammer the
broker and hide the problem behind constant retries. The operator's fencing (a
source's rollout and deletion, a Spark job's sink handover) and ``onceflow run``'s task
generations back off the same way; the operator keeps the backoff in the object's
status so that a restarted operator goes on waiting instead of starting over at one
second.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeVar

from onceflow.api.status import FencingStatus

FENCE_BACKOFF_S = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0)

S = TypeVar("S", bound=FencingStatus)


@dataclass(frozen=True)
class FenceFailures:
    count: int = 0
    retry_at: float = 0.0
    """Epoch seconds; fencing is not tried before."""

    def after_failure(self, now: float) -> FenceFailures:
        delay = FENCE_BACKOFF_S[min(self.count, len(FENCE_BACKOFF_S) - 1)]
        return FenceFailures(self.count + 1, now + delay)

    def wait_s(self, now: float) -> float:
        """How long fencing must still wait (0: it may be tried now)."""
        return max(0.0, self.retry_at - now)


def fence_failures(status: FencingStatus) -> FenceFailures:
    """The backoff ``status`` records."""
    if not status.fence_failures or not status.fence_retry_at:
        return FenceFailures()
    retry_at = datetime.fromisoformat(status.fence_retry_at).timestamp()
    return FenceFailures(status.fence_failures, retry_at)


def with_fence_failures(status: S, failures: FenceFailures | None) -> S:
    """``status`` recording ``failures`` (None: fencing succeeded, nothing to wait for)."""
    if failures is None:
        return status.model_copy(update={"fence_failures": None, "fence_retry_at": None})
    # Rounded up to the second RFC 3339 is written in here: a retry is never early.
    retry_at = datetime.fromtimestamp(math.ceil(failures.retry_at), UTC).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    return status.model_copy(update={"fence_failures": failures.count, "fence_retry_at": retry_at})
