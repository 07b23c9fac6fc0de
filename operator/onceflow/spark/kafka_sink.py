"""Onceflow's exactly-once Kafka sink for Structured Streaming (``foreachBatch``).

Spark's own Kafka sink is at-least-once: a micro-batch replayed after a driver crash
is written again. Here every output partition is written by its own transactional
producer (``<prefix>/sink/<job>/<partition>``) together with a marker recording the
query and batch id, in one transaction. A task attempt first initialises (fencing any
earlier attempt of the same partition), then reads that partition's marker
read_committed to the end: a batch this query already committed there is skipped.
Rows go to partitions by a stable hash of the key computed in the JVM, so a replay
puts every row where the first attempt did. The markers themselves (their topic, keys,
reads and writes) live in ``eos.sink_markers``; this module writes the rows around them.

The driver's half is here whichever writer runs on the executors: the JVM writer
(``spark.jvm_writer``, the default: the batch never leaves the JVM) or the Python one
below (``mapInArrow`` and confluent-kafka, kept as its fallback). Both follow the same
ids, markers and replay rules, so a batch one committed is skipped by the other.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from onceflow.api.columns import KAFKA_COLUMNS
from onceflow.api.spark import DEFAULT_KAFKA_SINK_WRITER, KafkaSinkWriter
from onceflow.eos.clients import admin_client, visible_partitions
from onceflow.eos.fencing import fence_transactional_ids
from onceflow.eos.sink_markers import (
    committed_marker,
    committed_markers,
    ensure_marker_topic,
    send_marker,
)
from onceflow.eos.topics import ensure_topic
from onceflow.eos.writer import (
    Headers,
    ProducerFailedError,
    ProducerFencedError,
    Record,
    TransactionAbortedError,
    TransactionalWriter,
    TxnState,
)
from onceflow.logic.sink_identity import SinkIdentity
from onceflow.logic.sink_markers import Layout, SinkMarker, already_written, started_layout
from onceflow.model.spark_names import (
    sink_marker_topic,
    sink_transactional_id,
    sink_transactional_ids,
)
from onceflow.spark.checkpoint_identity import CheckpointIdentity
from onceflow.spark.held_producers import HELD_PRODUCERS, HeldProducer
from onceflow.spark.jvm_writer import jvm_write_errors, write_in_jvm
from onceflow.spark.query_identity import QueryIdentity


@dataclass(frozen=True)
class SinkTarget:
    """Everything an executor needs; small and picklable."""

    bootstrap: str
    extra: Mapping[str, str]
    topic: str
    partitions: int
    marker_topic: str
    prefix: str
    job: str
    fail_once_flag: str | None = None
    """Chaos drill: see ``api.driver.DriverDrills.chaos_fail_sink_once``."""
    transaction_timeout_ms: int = 60000
    marker_partitions: int = 0
    """Partitions of the marker topic; output partition p's marker lives in p modulo it."""
    query: str = ""
    """The streaming query's id, set per batch once the query is bound."""
    namespace: str = ""
    earlier: SinkIdentity | None = None
    """The name and prefix the checkpoint was last written under, if others
    (``logic.sink_identity``): the batch an earlier driver left in flight may have been
    committed under their ids and markers."""

    @property
    def layout(self) -> Layout:
        return Layout(self.topic, self.partitions)

    @property
    def identity(self) -> SinkIdentity:
        return SinkIdentity(self.namespace, self.job, self.prefix, self.partitions)

    def renamed_from(self) -> SinkTarget | None:
        """This sink as it was named before a rename (None if it never was)."""
        if self.earlier is None:
            return None
        return dataclasses.replace(
            self,
            prefix=self.earlier.prefix,
            job=self.earlier.job,
            namespace=self.earlier.namespace,
            marker_topic=sink_marker_topic(self.earlier.prefix, self.earlier.job),
            marker_partitions=0,
            earlier=None,
        )


class SinkTopicError(ValueError):
    """The output topic exists with another partition count: partitioning would move."""


def prepare_topics(target: SinkTarget, admin: AdminClient) -> SinkTarget:
    """Creates the output and marker topics, or checks an existing output topic; returns
    the target with the marker topic's partition count (kept from its first layout:
    markers are addressed by key, so a re-partition needs no new marker topic)."""
    ensure_topic(target.bootstrap, target.topic, partitions=target.partitions, admin=admin)
    found = visible_partitions(admin, target.topic)
    if found != target.partitions:
        raise SinkTopicError(
            f"spec.sink.kafka.partitions: topic {target.topic!r} has {found} partitions, "
            f"not {target.partitions}; use a new topic or set partitions: {found}"
        )
    markers = ensure_marker_topic(target.bootstrap, target.marker_topic, target.partitions, admin)
    return dataclasses.replace(target, marker_partitions=markers)


@dataclass(frozen=True)
class RowRun:
    """Consecutive rows of one output partition, as columns: the producer loop reads
    them without building a tuple per row."""

    partition: int
    keys: Sequence[bytes | None]
    values: Sequence[bytes | None]
    headers: Sequence[Headers | None] | None = None
    """None: no row has headers."""

    @classmethod
    def of_records(cls, partition: int, rows: Iterable[Record]) -> RowRun:
        keys, values, headers = [], [], []
        for key, value, header in rows:
            keys.append(key)
            values.append(value)
            headers.append(header)
        return cls(partition, keys, values, headers if any(headers) else None)


class PartitionWrite:
    """One output partition's transaction in one task: its batch marker first, then the
    rows, committed once the task has sent every row it holds; skipped whole if the
    marker says this batch is already there.

    A producer the worker kept from an earlier batch is used as it is; a new one is
    initialised first (fencing any earlier attempt) and reads the last marker back."""

    def __init__(self, target: SinkTarget, batch_id: int, partition: int) -> None:
        self.target, self.batch_id, self.partition = target, batch_id, partition
        self.written = 0
        self.transactional_id = sink_transactional_id(target.prefix, target.job, partition)
        self.marker = SinkMarker(batch=batch_id, query=target.query, layout=target.layout)
        held = HELD_PRODUCERS.take(target.bootstrap, self.transactional_id)
        if held is None:
            self._start_new()
            return
        self.writer, self.known = held.writer, held.marker
        if self._written_already():
            return
        try:
            self.writer.begin()
            self._send_marker(acknowledged=True)
        except (ProducerFencedError, ProducerFailedError, TransactionAbortedError, KafkaException):
            # Another worker initialised the id since (or the broker forgot an idle
            # producer): nothing was committed, and a new producer aborts what was sent.
            self.writer.close()
            self._start_new()
        except BaseException:
            self.writer.close()
            raise

    def _start_new(self) -> None:
        t = self.target
        self.writer = TransactionalWriter(
            t.bootstrap,
            self.transactional_id,
            extra=t.extra,
            transaction_timeout_ms=t.transaction_timeout_ms,
        )
        try:
            self.writer.initialize(topic=t.topic)
            self.known = committed_marker(t, self.partition)
            if not self._written_already():
                self.writer.begin()
                self._send_marker(acknowledged=False)
        except BaseException:
            self.writer.close()
            raise

    def _written_already(self) -> bool:
        """A replay of a batch this query already committed here writes nothing."""
        t = self.target
        self.skip = already_written(self.known, t.query, self.batch_id, t.layout)
        return self.skip

    def _send_marker(self, acknowledged: bool) -> None:
        send_marker(self.writer, self.target, self.partition, self.marker, acknowledged)

    def send(self, run: RowRun) -> None:
        if self.skip:
            return
        keys: Iterable[bytes | None] = run.keys
        if self.target.fail_once_flag:
            keys = _failing_after(
                keys, 10, self.target.fail_once_flag, self.partition, self.batch_id
            )
        self.written += self.writer.send_rows(
            self.target.topic, self.partition, keys, run.values, run.headers
        )

    def commit(self) -> int:
        """Commits marker and rows; returns the rows written (0 when skipped)."""
        if not self.skip:
            self.writer.commit()
            self.known = self.marker
        return self.written

    def release(self) -> None:
        """Keeps a producer with no transaction open for the worker's next batch; closes
        one in any other state (its open transaction is left to the next initialiser)."""
        if self.writer.state is TxnState.READY:
            held = HeldProducer(self.writer, self.known)
            HELD_PRODUCERS.keep(held, self.target.bootstrap, self.transactional_id)
        else:
            self.writer.close()


def write_partition(
    target: SinkTarget,
    batch_id: int,
    partition: int,
    rows: Iterable[Record],
) -> int:
    """Writes one output partition of one batch exactly once; returns rows written."""
    write = PartitionWrite(target, batch_id, partition)
    try:
        write.send(RowRun.of_records(partition, rows))
        return write.commit()
    finally:
        write.release()


class InjectedSinkFailureError(RuntimeError):
    """Raised by a chaos drill, never in normal operation."""


T = TypeVar("T")


def _failing_after(
    items: Iterable[T], count: int, flag: str, partition: int, batch_id: int
) -> Iterator[T]:
    """The items (a column of the rows), failing (once per flag file) after ``count``
    were handed out."""
    for handed, item in enumerate(items, start=1):
        yield item
        if handed == count:
            _fail_once(flag, partition, batch_id)


def _fail_once(flag: str, partition: int, batch_id: int) -> None:
    try:
        with open(flag, "x") as marker:  # exclusive create: exactly one task fails
            marker.write(f"partition {partition} batch {batch_id}\n")
    except FileExistsError:
        return
    raise InjectedSinkFailureError(
        f"chaos drill: failing partition {partition} of batch {batch_id}"
    )


WRITTEN_SCHEMA = "partition INT, written LONG"
PARTITION_COLUMN = "partition"


def _spread(sql: Any) -> Any:
    """What decides a row's output partition: its key, or its value when keyless."""
    return sql.coalesce(sql.col("key"), sql.col("value"))


# What a Kafka record holds: any other output column would be silently dropped.
KAFKA_RECORD_COLUMNS = ("key", "value", "headers")
HEADERS_TYPE = KAFKA_COLUMNS["headers"]
# Header lists the sink casts to HEADERS_TYPE (text values become their UTF-8 bytes).
CASTABLE_HEADERS = (HEADERS_TYPE, "array<struct<key:string,value:string>>")


class OutputColumnsError(ValueError):
    """The transform's output does not fit a Kafka record."""


def check_kafka_columns(dtypes: list[tuple[str, str]]) -> None:
    """Refuses, at the driver's start, output a Kafka sink would silently drop or fail
    on in every batch (``dtypes``: the output's column names and Spark type names)."""
    columns = dict(dtypes)
    headers = columns.get("headers")
    if headers is not None and headers not in CASTABLE_HEADERS:
        raise OutputColumnsError(
            f"spec.transform: the output's column 'headers' is {headers}; a Kafka sink "
            f"writes headers as {HEADERS_TYPE} (as view `input` has them; string "
            "values are taken too)"
        )
    dropped = [c for c in columns if c not in KAFKA_RECORD_COLUMNS]
    if dropped or "value" not in columns:
        problem = (
            f"has column(s) {', '.join(map(repr, dropped))} that spec.sink.kafka would drop"
            if dropped
            else "has no column 'value'"
        )
        raise OutputColumnsError(
            f"spec.transform: the output {problem}; a Kafka sink writes key, value and "
            "headers only (fold other columns into the value, e.g. "
            "to_json(struct(*)) AS value)"
        )


def _as_bytes(frame: Any, column: str) -> Any:
    """Bytes as they are; other types as their string form, UTF-8 encoded."""
    from pyspark.sql import functions as sql
    from pyspark.sql.types import BinaryType

    if column not in frame.columns:
        return sql.lit(None).cast("binary").alias(column)
    if isinstance(frame.schema[column].dataType, BinaryType):
        return sql.col(column)
    return sql.col(column).cast("string").cast("binary").alias(column)


def with_output_partition(frame: Any, partitions: int) -> Any:
    """Key, value (as bytes, as Spark's own Kafka sink takes them), headers and the
    output partition.

    The partition is ``pmod(hash(key), partitions)``: Spark's Murmur3, the very hash
    ``repartition(partitions, key)`` shuffles by, so a shuffle puts each output
    partition's rows in one task without a Python pass; computed in the JVM, it is
    the same in every replay. Spark's own Kafka sink honours the column too, so a
    pipeline's output keeps its partitioning when it switches sinks at ``enabled``."""
    from pyspark.sql import functions as sql

    headers = (
        sql.col("headers").cast(HEADERS_TYPE)
        if "headers" in frame.columns
        else sql.array().cast(HEADERS_TYPE).alias("headers")
    )
    return frame.select(_as_bytes(frame, "key"), _as_bytes(frame, "value"), headers).withColumn(
        PARTITION_COLUMN, sql.pmod(sql.hash(_spread(sql)), sql.lit(partitions)).cast("int")
    )


def _record_headers(headers: list[dict[str, Any]] | None) -> Headers | None:
    """Arrow's header structs as the producer takes them (None: no headers)."""
    return [(h["key"], h["value"]) for h in headers] if headers else None


def shuffled_to_output_partitions(frame: Any, partitions: int) -> Any:
    """The rows with their output partition, hash-partitioned by the very expression
    that partition is computed from: each task holds whole output partitions, normally
    exactly one."""
    from pyspark.sql import functions as sql

    return with_output_partition(frame, partitions).repartition(partitions, _spread(sql))


def arrow_runs(batches: Iterable[Any]) -> Iterator[RowRun]:
    """The rows of the Arrow batches a task of ``shuffled_to_output_partitions`` hands
    to Python, in runs of one output partition. The shuffle normally gives a task one
    partition's rows, so a batch is looked at per column, not per row: one run when it
    holds one partition, headers only when a row has any."""
    import pyarrow.compute as pc

    for batch in batches:
        if not batch.num_rows:
            continue
        keys = batch.column("key").to_pylist()
        values = batch.column("value").to_pylist()
        header_column = batch.column("headers")
        headers = (
            [_record_headers(h) for h in header_column.to_pylist()]
            if pc.max(pc.list_value_length(header_column)).as_py()
            else None
        )
        partitions = batch.column(PARTITION_COLUMN)
        bounds = pc.min_max(partitions).as_py()
        if bounds["min"] == bounds["max"]:
            yield RowRun(bounds["min"], keys, values, headers)
            continue
        start = 0
        for partition, run in itertools.groupby(partitions.to_pylist()):
            end = start + sum(1 for _ in run)
            yield RowRun(
                partition,
                keys[start:end],
                values[start:end],
                None if headers is None else headers[start:end],
            )
            start = end


def write_partitions(target: SinkTarget, batch_id: int) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """``mapInArrow`` step: one transaction per output partition the task holds, all
    committed at the task's end. The shuffle normally gives each task one partition's
    rows; should it ever give several, even interleaved (a coalescing optimiser), each
    still gets one transaction, so no sort is needed to keep a partition in one piece
    (a partition written in two pieces would lose the second: its marker would say
    the batch is there)."""

    def write(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        writes: dict[int, PartitionWrite] = {}
        try:
            for run in arrow_runs(batches):
                if run.partition not in writes:
                    writes[run.partition] = PartitionWrite(target, batch_id, run.partition)
                writes[run.partition].send(run)
            written = {partition: write.commit() for partition, write in writes.items()}
        finally:
            for write in writes.values():
                write.release()
        yield pa.RecordBatch.from_arrays(
            [pa.array(list(written), pa.int32()), pa.array(list(written.values()), pa.int64())],
            names=[PARTITION_COLUMN, "written"],
        )

    return write


def write_shuffled(
    grouped: Any, target: SinkTarget, batch_id: int, writer: KafkaSinkWriter
) -> None:
    """The executors' half of a batch: its rows, shuffled to their output partitions
    (``shuffled_to_output_partitions``), written by ``writer``, each output partition
    with its marker in one transaction, a partition the batch is already in skipped."""
    if writer == "jvm":
        write_in_jvm(grouped, target, batch_id)
    else:
        grouped.mapInArrow(write_partitions(target, batch_id), WRITTEN_SCHEMA).collect()


def where_batch_started(target: SinkTarget, batch_id: int, admin: AdminClient) -> SinkTarget:
    """The target a driver's first batch must be written to. Only that batch can be one
    an earlier driver left in flight, perhaps in another layout or under the ids of a
    prefix since renamed: it is finished where it started (the supervisor fenced those
    ids; this driver's producers take them over by initialising them again)."""
    for candidate in (target, target.renamed_from()):
        if candidate is None:
            continue
        layout = started_layout(committed_markers(candidate, admin), target.query, batch_id)
        if layout is not None:
            started = dataclasses.replace(
                candidate, topic=layout.topic, partitions=layout.partitions
            )
            return prepare_topics(started, admin) if candidate is not target else started
    return target


class ExactlyOnceKafkaSink:
    """The ``foreachBatch`` function: Spark shuffles rows to their output partitions in
    the JVM, where ``writer`` jvm writes each output partition's rows and batch marker in
    one transaction; with ``writer`` python, Python sees Arrow batches and does."""

    def __init__(
        self,
        target: SinkTarget,
        checkpoint: CheckpointIdentity | None = None,
        writer: KafkaSinkWriter = DEFAULT_KAFKA_SINK_WRITER,
    ) -> None:
        self.admin: AdminClient | None = admin_client(target.bootstrap, target.extra)
        """Until the first batch: the topics and the batch an earlier driver left."""
        self.target = prepare_topics(target, self.admin)
        self.query = QueryIdentity()
        self.checkpoint = checkpoint
        self.writer = writer
        self.failures: tuple[type[BaseException], ...] = (
            jvm_write_errors() if writer == "jvm" else (KafkaException,)
        )
        """What a write raises that fails the batch with this sink's error."""
        if target.earlier is not None:
            fence_earlier_ids(target, target.earlier)

    def __call__(self, frame: Any, batch_id: int) -> None:
        target = dataclasses.replace(self.target, query=self.query.wait())
        if self.admin is not None:
            target = where_batch_started(target, batch_id, self.admin)
            self.admin = None
        if self.checkpoint is not None and target.identity.same_writer(self.target.identity):
            self.checkpoint.claim()
        grouped = shuffled_to_output_partitions(frame, target.partitions)
        try:
            write_shuffled(grouped, target, batch_id, self.writer)
        except self.failures as error:  # surfaced on the driver: fail the batch, keep state
            raise RuntimeError(f"exactly-once Kafka sink failed in batch {batch_id}") from error


def fence_earlier_ids(target: SinkTarget, earlier: SinkIdentity) -> None:
    """A job renamed on its checkpoint: a task of the earlier job's last driver may
    still hold a transaction open that no batch of this query will ever name (one its
    checkpoint never recorded as planned); fenced before anything is written. (A prefix
    renamed by the supervisor was fenced by it already; fencing again costs a round
    trip.)"""
    ids = sink_transactional_ids(
        earlier.prefix, earlier.job, max(earlier.partitions, target.partitions)
    )
    report = fence_transactional_ids(target.bootstrap, ids, extra=target.extra)
    if not report.ok:
        raise RuntimeError(
            f"the sink's earlier transactional ids ({earlier.prefix}, job {earlier.job}) "
            f"could not be fenced: {report.summary()}"
        )


def sink_target(
    bootstrap: str,
    extra: Mapping[str, str],
    topic: str,
    partitions: int,
    prefix: str,
    job: str,
    fail_once_flag: str | None = None,
    transaction_timeout_ms: int = 60000,
    namespace: str = "",
    earlier: SinkIdentity | None = None,
) -> SinkTarget:
    return SinkTarget(
        bootstrap,
        dict(extra),
        topic,
        partitions,
        sink_marker_topic(prefix, job),
        prefix,
        job,
        fail_once_flag,
        transaction_timeout_ms,
        namespace=namespace,
        earlier=earlier,
    )
