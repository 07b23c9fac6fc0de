"""Fencing from a reconciler pass, with the backoff kept in the object's status.

The source's rollout, its deletion and a Spark job's sink handover all fence the same
way: not before the recorded backoff ends, and on failure the next backoff recorded
(with Degraded/FencingFailed naming what waits for it) before the pass gives up.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from onceflow.control.errors import RetryLaterError
from onceflow.control.operator_metrics import fencing_failed, timed_fencing
from onceflow.eos.fencing import FencingReport
from onceflow.logic.fence_backoff import FenceFailures


def waiting_for_backoff(recorded: FenceFailures, blocked: str, waiting_s: float) -> RetryLaterError:
    """What a pass raises while the backoff ``recorded`` lasts (``waiting_s`` more)."""
    return RetryLaterError(
        f"fencing failed {recorded.count} time(s) in a row; {blocked} "
        f"(retrying in {waiting_s:.0f}s)",
        waiting_s,
    )


def fence_with_backoff(
    fence: Callable[[], FencingReport],
    recorded: FenceFailures,
    record_failure: Callable[[str, FenceFailures], object],
    blocked: str,
    kind: str,
    clock: Callable[[], float] = time.time,
) -> FencingReport:
    """Runs ``fence`` once the backoff ``recorded`` allows; on failure hands the
    message and the next backoff to ``record_failure`` (a status write) and raises
    RetryLater until then. ``blocked`` says what waits for fencing; ``kind`` labels
    the fencing metrics (KafkaSource, SparkJob).

    The backoff counts from the failure, not from the attempt: a fence that timed out
    (30 s by default, a broker down) has outlived the first steps already."""
    if waiting := recorded.wait_s(clock()):
        raise waiting_for_backoff(recorded, blocked, waiting)
    with timed_fencing(kind):
        report = fence()
    if report.ok:
        return report
    fencing_failed(kind)
    failed_at = clock()
    failures = recorded.after_failure(failed_at)
    delay = failures.wait_s(failed_at)
    message = f"{report.summary()}; {blocked} (retrying in {delay:.0f}s)"
    record_failure(message, failures)
    raise RetryLaterError(message, delay)
