"""What the driver tells about its query after every micro-batch: Prometheus gauges
(``/metrics`` on the driver), one ``onceflow progress`` log line, and the last progress
as an annotation on its own pod, which the operator copies into the SparkJob's status.
A failure to report is logged and never touches the query."""

from __future__ import annotations

import json
import logging
import sys
import time
from datetime import datetime
from typing import Any

from prometheus_client import Gauge, start_http_server

from onceflow.api.spark import QueryProgress
from onceflow.logic.query_progress import PROGRESS_ANNOTATION, query_progress

log = logging.getLogger(__name__)

_LABELS = ("job",)
BATCH_ID = Gauge("onceflow_spark_batch_id", "Last finished micro-batch", _LABELS)
INPUT_ROWS = Gauge("onceflow_spark_input_rows", "Records read by the last batch", _LABELS)
INPUT_RATE = Gauge("onceflow_spark_input_rows_per_second", "Arrival rate", _LABELS)
PROCESSED_RATE = Gauge(
    "onceflow_spark_processed_rows_per_second", "Processing rate of the last batch", _LABELS
)
BATCH_SECONDS = Gauge("onceflow_spark_batch_seconds", "Wall time of the last batch", _LABELS)
SINK_SECONDS = Gauge(
    "onceflow_spark_sink_commit_seconds", "Time in the sink (its commits) last batch", _LABELS
)
STATE_ROWS = Gauge("onceflow_spark_state_rows", "Rows in the query's state stores", _LABELS)
WATERMARK = Gauge(
    "onceflow_spark_watermark_seconds", "Event-time watermark (Unix seconds)", _LABELS
)
LATE_ROWS = Gauge(
    "onceflow_spark_rows_dropped_by_watermark",
    "Records the last batch dropped as behind the watermark",
    _LABELS,
)

# The operator reads the annotation on its polls; more often is only API traffic.
ANNOTATE_EVERY_S = 5.0


def export(job: str, progress: QueryProgress) -> None:
    BATCH_ID.labels(job).set(progress.batch_id)
    INPUT_ROWS.labels(job).set(progress.input_rows)
    INPUT_RATE.labels(job).set(progress.input_rows_per_second or 0)
    PROCESSED_RATE.labels(job).set(progress.processed_rows_per_second or 0)
    BATCH_SECONDS.labels(job).set(progress.batch_duration_ms / 1000)
    SINK_SECONDS.labels(job).set((progress.sink_commit_ms or 0) / 1000)
    STATE_ROWS.labels(job).set(progress.state_rows or 0)
    LATE_ROWS.labels(job).set(progress.rows_dropped_by_watermark or 0)
    if progress.watermark:
        stamp = datetime.fromisoformat(progress.watermark.replace("Z", "+00:00"))
        WATERMARK.labels(job).set(stamp.timestamp())


class PodAnnotator:
    """Patches the driver's own pod (named in Spark's conf on Kubernetes; absent in
    local mode, where nothing is annotated). A progress that comes too soon after the
    last patch waits for the next one, or for ``flush`` when the query goes idle or
    ends, so the status never stays on an older batch."""

    def __init__(self, namespace: str | None, pod: str | None) -> None:
        self.target = (namespace, pod) if namespace and pod else None
        self.api: Any = None
        self.last = 0.0
        self.pending: QueryProgress | None = None

    def annotate(self, progress: QueryProgress) -> None:
        self.pending = progress
        if time.monotonic() - self.last >= ANNOTATE_EVERY_S:
            self.flush()

    def flush(self) -> None:
        progress, self.pending = self.pending, None
        if self.target is None or progress is None:
            return
        self.last = time.monotonic()
        if self.api is None:
            from kubernetes import client, config

            config.load_incluster_config()
            self.api = client.CoreV1Api()
        namespace, pod = self.target
        annotation = json.dumps(progress.to_wire())
        body = {"metadata": {"annotations": {PROGRESS_ANNOTATION: annotation}}}
        self.api.patch_namespaced_pod(pod, namespace, body)


def flush(annotator: PodAnnotator) -> None:
    """Hands over the progress a throttled patch held back."""
    try:
        annotator.flush()
    except Exception:  # reporting must never fail the query
        log.exception("could not report the query's progress")


def progress_listener(job: str, annotator: PodAnnotator) -> Any:
    """A ``StreamingQueryListener`` reporting each finished batch."""
    from pyspark.sql.streaming.listener import StreamingQueryListener

    class Reporter(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:  # noqa: N802 (Spark's names)
            pass

        def onQueryIdle(self, event: Any) -> None:  # noqa: N802
            flush(annotator)

        def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
            flush(annotator)

        def onQueryProgress(self, event: Any) -> None:  # noqa: N802
            try:
                progress = query_progress(json.loads(event.progress.json))
                wire = json.dumps(progress.to_wire())
                print(f"onceflow progress {wire}", file=sys.stderr, flush=True)
                export(job, progress)
                annotator.annotate(progress)
            except Exception:  # reporting must never fail a batch
                log.exception("could not report the query's progress")

    return Reporter()


def report_progress(spark: Any, job: str, metrics_port: int) -> PodAnnotator:
    """Starts ``/metrics`` (port 0: none) and reports every batch from now on; the
    caller flushes the returned annotator once the query has ended. Best effort: Spark's
    listener bus is asynchronous, so a last progress still on it when the driver exits
    is not annotated."""
    if metrics_port:
        try:
            start_http_server(metrics_port)
        except OSError as error:  # the query matters more than its gauges
            log.warning("no /metrics on port %d: %s", metrics_port, error)
    conf = spark.conf
    annotator = PodAnnotator(
        conf.get("spark.kubernetes.namespace", None),
        conf.get("spark.kubernetes.driver.pod.name", None),
    )
    spark.streams.addListener(progress_listener(job, annotator))
    return annotator
