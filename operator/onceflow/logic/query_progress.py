"""A streaming query's progress (Spark's ``StreamingQueryProgress`` JSON) reduced to
what a SparkJob's status shows and the driver exports as metrics."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from onceflow.api.spark import QueryProgress

# The pod annotation through which a driver hands its last progress to the operator:
# the driver may already patch its own pod (it manages its executors'), and needs no
# right on SparkJobs.
PROGRESS_ANNOTATION = "onceflow.io/query-progress"


def _rate(value: Any) -> float | None:
    """Spark writes NaN for a rate it has no interval for; status wants none then."""
    if value is None:
        return None
    rate = float(value)
    return None if math.isnan(rate) else round(rate, 1)


def _total(operators: Sequence[Mapping[str, Any]], metric: str) -> int | None:
    """A state-operator metric summed over the query's stateful steps (None: it has
    none)."""
    return sum(int(op.get(metric) or 0) for op in operators) if operators else None


def query_progress(progress: Mapping[str, Any]) -> QueryProgress:
    durations = progress.get("durationMs") or {}
    operators = progress.get("stateOperators") or []
    return QueryProgress(
        batch_id=int(progress["batchId"]),
        timestamp=str(progress["timestamp"]),
        input_rows=int(progress.get("numInputRows") or 0),
        input_rows_per_second=_rate(progress.get("inputRowsPerSecond")),
        processed_rows_per_second=_rate(progress.get("processedRowsPerSecond")),
        batch_duration_ms=int(durations.get("triggerExecution") or 0),
        sink_commit_ms=durations.get("addBatch"),
        state_rows=_total(operators, "numRowsTotal"),
        rows_dropped_by_watermark=_total(operators, "numRowsDroppedByWatermark"),
        watermark=(progress.get("eventTime") or {}).get("watermark"),
    )


def driver_progress(pods: Sequence[Mapping[str, Any]]) -> QueryProgress | None:
    """The progress the newest driver pod among ``pods`` announced (None if none did,
    or in a shape this version cannot read)."""
    drivers = [
        pod
        for pod in pods
        if (pod["metadata"].get("labels") or {}).get("spark-role") == "driver"
        and PROGRESS_ANNOTATION in (pod["metadata"].get("annotations") or {})
    ]
    if not drivers:
        return None
    newest = max(drivers, key=lambda pod: pod["metadata"].get("creationTimestamp") or "")
    try:
        return QueryProgress.model_validate_json(
            newest["metadata"]["annotations"][PROGRESS_ANNOTATION]
        )
    except ValueError:
        return None
