"""Per-task Prometheus metrics, after KIP-618's source-task transaction metrics.

One task runs per process, so the default registry is per task; labels still carry
the source and task so that scraped series stay distinct.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import Counter, Gauge, Histogram, start_http_server

from onceflow.api.connector import SourceTask

_LABELS = ("source", "task")
TRANSACTION_SIZE_MIN = Gauge(
    "onceflow_source_transaction_size_min", "Fewest records in one committed transaction", _LABELS
)
TRANSACTION_SIZE_MAX = Gauge(
    "onceflow_source_transaction_size_max", "Most records in one committed transaction", _LABELS
)
TRANSACTION_SIZE_AVG = Gauge(
    "onceflow_source_transaction_size_avg", "Mean records per committed transaction", _LABELS
)
RECORDS_COMMITTED = Counter(
    "onceflow_source_records_committed", "Records made durable (committed or flushed)", _LABELS
)
TRANSACTIONS_COMMITTED = Counter(
    "onceflow_source_transactions_committed", "Committed transactions or offset flushes", _LABELS
)
TRANSACTIONS_ABORTED = Counter(
    "onceflow_source_transactions_aborted", "Aborted transactions", _LABELS
)
PRODUCER_FENCED = Counter(
    "onceflow_source_producer_fenced", "Times this task found itself fenced", _LABELS
)
RETAINED_BYTES = Gauge(
    "onceflow_source_retained_bytes",
    "What the source system keeps until this task has read it (a replication slot's WAL)",
    _LABELS,
)
BYTES_BEHIND = Gauge(
    "onceflow_source_bytes_behind",
    "What the source system holds that this task has not delivered yet, in bytes "
    "(a CDC source's WAL, a files source's unread bytes)",
    _LABELS,
)
RECORDS_BEHIND = Gauge(
    "onceflow_source_records_behind",
    "Records of the source system this task has not delivered yet (a mirror's lag)",
    _LABELS,
)
PAUSED = Gauge(
    "onceflow_source_paused",
    "1 while the task holds still because its source is paused (spec.state: paused)",
    _LABELS,
)
COMMIT_LATENCY = Histogram(
    "onceflow_source_commit_latency_seconds",
    "Time to commit a transaction (or flush offsets)",
    _LABELS,
    buckets=(0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)


@dataclass
class TaskMetrics:
    """Updates the exported series and keeps totals for progress lines."""

    source: str
    task_id: int
    records: int = 0
    transactions: int = 0
    aborts: int = 0
    _sizes: list[int] = field(default_factory=lambda: [0, 0])  # min, max

    def __post_init__(self) -> None:
        # Every series from the start, at zero: a rate or an alert on aborts or fencing
        # has a series to work on before the first one happens.
        for series in (TRANSACTIONS_ABORTED, PRODUCER_FENCED, RECORDS_COMMITTED,
                       TRANSACTIONS_COMMITTED, PAUSED):  # fmt: skip
            series.labels(**self._labels)

    @property
    def _labels(self) -> dict[str, str]:
        return {"source": self.source, "task": str(self.task_id)}

    def serve(self, port: int) -> None:
        if port:
            start_http_server(port)

    def committed(self, size: int, seconds: float) -> None:
        self.records += size
        self.transactions += 1
        low, high = self._sizes
        self._sizes = [size if self.transactions == 1 else min(low, size), max(high, size)]
        TRANSACTION_SIZE_MIN.labels(**self._labels).set(self._sizes[0])
        TRANSACTION_SIZE_MAX.labels(**self._labels).set(self._sizes[1])
        TRANSACTION_SIZE_AVG.labels(**self._labels).set(self.records / self.transactions)
        RECORDS_COMMITTED.labels(**self._labels).inc(size)
        TRANSACTIONS_COMMITTED.labels(**self._labels).inc()
        COMMIT_LATENCY.labels(**self._labels).observe(seconds)

    def aborted(self) -> None:
        self.aborts += 1
        TRANSACTIONS_ABORTED.labels(**self._labels).inc()

    def fenced(self) -> None:
        PRODUCER_FENCED.labels(**self._labels).inc()

    def paused(self, holding: bool) -> None:
        PAUSED.labels(**self._labels).set(1 if holding else 0)

    def measured(self, task: SourceTask) -> None:
        """What the task last measured of its source system, between polls."""
        size = task.retained_bytes()
        if size is not None:
            RETAINED_BYTES.labels(**self._labels).set(size)
        behind = task.behind()
        if behind is not None and behind.bytes is not None:
            BYTES_BEHIND.labels(**self._labels).set(behind.bytes)
        if behind is not None and behind.records is not None:
            RECORDS_BEHIND.labels(**self._labels).set(behind.records)
