"""Fencing from a reconciler pass, with the backoff kept in the object's status.

The source's rollout, its deletion and a Spark job's sink handover all fence the same
way: not before the recorded backoff ends, and on failure the next backoff recorded
(with Degraded/FencingFailed naming what waits for it) before the pass gives up.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from onceflow.control.errors import RetryLaterError
from onceflow.eos.fencing import FencingReport
from onceflow.logic.fence_backoff import FenceFailures


def fence_with_backoff(
    fence: Callable[[], FencingReport],
    recorded: FenceFailures,
    record_failure: Callable[[str, FenceFailures], object],
    blocked: str,
) -> FencingReport:
    """Runs ``fence`` once the backoff ``recorded`` allows; on failure hands the
    message and the next backoff to ``record_failure`` (a status write) and raises
    RetryLater until then. ``blocked`` says what waits for fencing."""
    now = time.time()
    if waiting := recorded.wait_s(now):
        raise RetryLaterError(
            f"fencing failed {recorded.count} time(s) in a row; {blocked} "
            f"(retrying in {waiting:.0f}s)",
            waiting,
        )
    report = fence()
    if report.ok:
        return report
    failures = recorded.after_failure(now)
    message = f"{report.summary()}; {blocked} (retrying in {failures.wait_s(now):.0f}s)"
    record_failure(message, failures)
    raise RetryLaterError(message, failures.wait_s(now))
