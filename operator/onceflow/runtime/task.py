"""The source task loop: poll the connector, write records (and their offsets) to
Kafka, make them durable at each boundary, then tell the connector.

``enabled``: records and offsets in one transaction per boundary. Every mode resumes
from offsets read ``read_committed`` to the end: after an ``enabled`` era the offsets
topic can hold offsets of aborted transactions, and a ``disabled`` task that resumed
from one would skip records that were never made visible. ``disabled``/``preparing``:
idempotent producer, offsets flushed after acknowledgement (at-least-once);
``preparing`` obeys the generation check.

Exit codes (``ExitCode``): 0 stopped on request or superseded by a newer generation,
75 fenced while its generation is still current (restart and fence back), 1 error.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from onceflow.api.connector import (
    ConnectorError,
    RecordingTransactionContext,
    SourceConnector,
    SourceOffset,
    SourcePartition,
    SourceRecord,
    SourceTask,
    TaskContext,
)
from onceflow.api.pipeline import WorkloadState
from onceflow.api.source import ExactlyOnceSupport
from onceflow.api.task import TaskSettings
from onceflow.eos.clients import admin_client, mounted_secret
from onceflow.eos.offsets import (
    OffsetKeys,
    OffsetsTopicError,
    StoredOffsets,
    ensure_offsets_topic,
    read_offsets,
)
from onceflow.eos.topics import ensure_topic
from onceflow.eos.writer import (
    CommitUncertainError,
    IdempotentWriter,
    ProducerFailedError,
    ProducerFencedError,
    TransactionAbortedError,
    TransactionalWriter,
    TransactionTimedOutError,
)
from onceflow.runtime.authority import CurrentGeneration, GenerationAuthority
from onceflow.runtime.boundaries import (
    AtStop,
    Boundaries,
    ConnectorContractError,
    boundaries_for,
)
from onceflow.runtime.metrics import TaskMetrics

log = logging.getLogger(__name__)

# An idle connector is asked again this often; short enough that a new record waits
# little, long enough that an idle task costs no CPU to speak of.
IDLE_WAIT_S = 0.05


class ExitCode(IntEnum):
    STOPPED = 0
    """Stopped on request, or superseded by a newer generation (wrote nothing)."""
    ERROR = 1
    FENCED = 75
    """Fenced while its generation is current: a same-id successor runs; restart."""


Progress = Callable[[dict[str, Any]], None]


@dataclass
class PendingBatch:
    """Records written since the last boundary, and the latest offset per partition."""

    records: list[SourceRecord] = field(default_factory=list)
    offsets: dict[bytes, tuple[SourcePartition, SourceOffset]] = field(default_factory=dict)
    opened_at: float = 0.0

    @property
    def open(self) -> bool:
        return bool(self.records)

    def add(self, records: list[SourceRecord], keys: OffsetKeys) -> None:
        """Adds the records of one poll. Their partitions' offset keys are looked up
        once per partition object: connectors share one object among a partition's
        records, and while the records are held their objects' ids are their own."""
        if not records:
            return
        if not self.records:
            self.opened_at = time.monotonic()
        self.records.extend(records)
        offsets, key_of = self.offsets, keys.of
        by_id: dict[int, bytes] = {}
        for record in records:
            partition = record.source_partition
            key = by_id.get(id(partition))
            if key is None:
                key = by_id[id(partition)] = key_of(partition)
            offsets[key] = (partition, record.source_offset)

    def age_ms(self) -> float:
        return (time.monotonic() - self.opened_at) * 1000 if self.records else 0.0


class TaskRunner:
    """Runs one task until stopped, superseded, fenced or failed."""

    def __init__(
        self,
        settings: TaskSettings,
        connector: SourceConnector,
        authority: GenerationAuthority,
        stop: threading.Event,
        progress: Progress | None = None,
    ) -> None:
        self.settings = settings
        self.connector = connector
        self.authority = authority
        self.stop = stop
        self.progress = progress or (lambda _event: None)
        self.metrics = TaskMetrics(settings.source, settings.task_id)
        self.committed_offsets: dict[str, Any] = {}
        self.failure: str | None = None
        """Why the task ended with an error, for whoever started it."""
        self._next_look = 0.0

    # -- shared steps ---------------------------------------------------------------

    def _superseded(self, situation: str) -> bool:
        return self._must_end(self.authority.current(), situation)

    def _must_end(self, current: CurrentGeneration, situation: str) -> bool:
        """Superseded by a newer generation, or its source stopped: either way this
        task must not write another record."""
        s = self.settings
        if current.supersedes(s.incarnation, s.generation):
            log.info(
                "task %s: %s: generation %s (incarnation %s) superseded by %s (%s); exiting 0",
                s.task_id,
                situation,
                s.generation,
                s.incarnation,
                current.generation,
                current.incarnation,
            )
            return True
        if current.state is WorkloadState.STOPPED:
            log.info("task %s: %s: the source is stopped; exiting 0", s.task_id, situation)
            return True
        return False

    def _look(self) -> CurrentGeneration | None:
        """The authority's answer, or None when it cannot be asked now (an API server
        restarting): a running task keeps running rather than fail on that."""
        self._next_look = time.monotonic() + self.settings.state_look_ms / 1000
        try:
            return self.authority.current()
        except Exception as error:  # any failure to ask; the next look asks again
            log.warning("task %s: could not ask whether to pause: %s", self.settings.task_id, error)
            return None

    def _ends_between_transactions(self) -> bool:
        """Asked only while no transaction is open. Holds still while the source is
        paused (the producer and its transactional id stay; nothing is polled or
        committed, so no transaction can time out meanwhile), and answers whether the
        task must end: superseded, or its source stopped."""
        if time.monotonic() < self._next_look:
            return False
        current = self._look()
        if current is None or current.state is not WorkloadState.PAUSED:
            return current is not None and self._must_end(current, "between transactions")
        if self._must_end(current, "pausing"):
            return True
        s = self.settings
        log.info("task %s: the source is paused; holding still", s.task_id)
        self.metrics.paused(True)
        self.progress({"event": "paused", "task": s.task_id, "generation": s.generation})
        try:
            while not self.stop.wait(s.state_look_ms / 1000):
                current = self._look()
                if current is None:
                    continue
                if self._must_end(current, "while paused"):
                    return True
                if current.state is not WorkloadState.PAUSED:
                    log.info("task %s: the source is running again", s.task_id)
                    self.progress({"event": "resumed", "task": s.task_id})
                    return False
            return False  # asked to stop: the caller's loop sees it
        finally:
            self.metrics.paused(False)

    def _start_task(
        self, offsets: StoredOffsets, txn: RecordingTransactionContext | None
    ) -> SourceTask:
        task = self.connector.task_class()
        task.start(
            TaskContext(
                task_id=self.settings.task_id,
                config=self.settings.connector_config,
                offsets=offsets,
                transactions=txn,
                secrets=mounted_secret(self.settings.connector_secret_dir),
                exactly_once_required=(
                    self.settings.exactly_once_support is ExactlyOnceSupport.REQUIRED
                ),
            )
        )
        return task

    def _read_offsets(self) -> StoredOffsets:
        s = self.settings
        admin = admin_client(s.bootstrap_servers, s.kafka_config)
        # Like Connect's topic.creation: the output topic is created if missing (the
        # broker's partition count), so tasks never depend on broker-side auto-creation.
        ensure_topic(s.bootstrap_servers, s.topic, partitions=-1, admin=admin)
        ensure_offsets_topic(s.bootstrap_servers, s.offsets_topic, s.kafka_config, admin=admin)
        return read_offsets(
            s.bootstrap_servers,
            s.offsets_topic,
            s.offsets_owner,
            legacy_owner=s.source,
            extra=s.kafka_config,
            isolation="read_committed",
            admin=admin,
        )

    def _idle(self, task: SourceTask) -> None:
        """Nothing to write: the time to refresh what is measured outside commits (a
        stuck source commits nothing while its system keeps more and more for it)."""
        self.metrics.measured(task)
        self.stop.wait(IDLE_WAIT_S)

    def _made_durable(self, task: SourceTask, batch: PendingBatch, seconds: float) -> None:
        self.metrics.committed(len(batch.records), seconds)
        self.metrics.measured(task)
        for partition, offset in batch.offsets.values():
            shown = "/".join(str(v) for v in partition.values())
            values = list(offset.values())
            self.committed_offsets[shown] = values[0] if len(values) == 1 else dict(offset)
        for record in batch.records:
            task.commit_record(record)
        task.commit()
        self.progress(
            {
                "event": "committed",
                "task": self.settings.task_id,
                "generation": self.settings.generation,
                "records": self.metrics.records,
                "transactions": self.metrics.transactions,
                "offsets": self.committed_offsets,
            }
        )

    def run(self) -> ExitCode:
        try:
            if self.settings.mode.transactional:
                return self._run_transactional()
            return self._run_idempotent()
        except (
            ProducerFailedError,
            CommitUncertainError,
            TransactionAbortedError,
            TransactionTimedOutError,
            ConnectorContractError,
            ConnectorError,
            OffsetsTopicError,
        ) as error:
            log.error("task %s: %s", self.settings.task_id, error)
            self.failure = str(error)
            return ExitCode.ERROR

    # -- enabled: transactions ------------------------------------------------------

    def _run_transactional(self) -> ExitCode:
        s = self.settings
        writer = TransactionalWriter(
            s.bootstrap_servers,
            s.transactional_id,
            extra=s.kafka_config,
            transaction_timeout_ms=s.transaction_timeout_ms,
        )
        try:
            # Asked twice. Before initialising: a restarted task of a replaced generation
            # must not fence (abort) the live task that took over its id just to learn
            # that it is superseded. After: the answer that counts, since a generation
            # planned in between is fenced only once this init has bumped the epoch.
            if self._superseded("before initialising"):
                return ExitCode.STOPPED
            writer.initialize(topic=s.topic)
            if self._superseded("before writing anything"):
                return ExitCode.STOPPED
            boundaries = boundaries_for(s)
            task = self._start_task(self._read_offsets(), boundaries.transactions)
            try:
                self._transactional_loop(task, writer, boundaries)
            finally:
                task.stop()
            return ExitCode.STOPPED
        except ProducerFencedError as fenced:
            self.metrics.fenced()
            if self._superseded("fenced"):
                return ExitCode.STOPPED
            log.warning("task %s: %s while current; exiting to fence back", s.task_id, fenced)
            return ExitCode.FENCED
        except ProducerFailedError:
            # A producer found dead at a produce may have been fenced without saying so:
            # a task whose generation ended (superseded, stopped) ends as asked, not with
            # an error that restarts it.
            current = self._look()
            if current is not None and self._must_end(current, "producer failed"):
                return ExitCode.STOPPED
            raise
        finally:
            writer.close()

    def _transactional_loop(
        self, task: SourceTask, writer: TransactionalWriter, boundaries: Boundaries
    ) -> None:
        s = self.settings
        batch = PendingBatch()
        offset_keys = OffsetKeys(s.offsets_owner)
        if (txn := boundaries.transactions) is not None:
            txn.opened_at = lambda: batch.opened_at if batch.open else None

        def commit() -> None:
            nonlocal batch
            writer.send_offsets(s.offsets_topic, s.offsets_owner, batch.offsets)
            started = time.monotonic()
            writer.commit()
            self._made_durable(task, batch, time.monotonic() - started)
            batch = PendingBatch()

        def abort() -> None:
            # KIP-618: an aborted transaction's records are dropped, but their offsets
            # are still committed (alone, in a transaction of their own), so the
            # connector's decision to drop them survives a restart.
            nonlocal batch
            writer.abort()
            writer.begin()
            writer.send_offsets(s.offsets_topic, s.offsets_owner, batch.offsets)
            writer.commit()
            self.metrics.aborted()
            self.progress(
                {
                    "event": "aborted",
                    "task": s.task_id,
                    "discarded": len(batch.records),
                    "aborts": self.metrics.aborts,
                }
            )
            batch = PendingBatch()

        def write(records: list[SourceRecord]) -> None:
            if records:
                if not batch.open:
                    writer.begin()
                writer.send_records(records, s.topic)
                batch.add(records, offset_keys)

        while not self.stop.is_set() and (batch.open or not self._ends_between_transactions()):
            records = task.poll()
            for piece, request in boundaries.pieces(records):
                write(piece)
                if request is not None and batch.open:
                    commit() if request.commit else abort()
            if batch.open and boundaries.commit_after_poll(batch.age_ms()):
                commit()
            if not records:
                self._idle(task)
        if batch.open:
            commit() if boundaries.at_stop is AtStop.COMMIT else writer.abort()

    # -- disabled / preparing: idempotent, offsets after acks -----------------------

    def _run_idempotent(self) -> ExitCode:
        s = self.settings
        # Idempotent producers cannot be fenced: asking the record first is all that
        # keeps a task of a replaced generation (a stale supervisor started it) from
        # writing next to its successor, in `disabled` as in `preparing`.
        if self._superseded("before writing anything"):
            return ExitCode.STOPPED
        writer = IdempotentWriter(s.bootstrap_servers, extra=s.kafka_config)
        task = self._start_task(self._read_offsets(), None)
        batch = PendingBatch()
        offset_keys = OffsetKeys(s.offsets_owner)
        try:
            last_flush = time.monotonic()
            while True:
                stopping = self.stop.is_set() or (
                    not batch.open and self._ends_between_transactions()
                )
                records = [] if stopping else task.poll()
                writer.send_records(records, s.topic)
                batch.add(records, offset_keys)
                due = (time.monotonic() - last_flush) * 1000 >= s.offset_flush_interval_ms
                if batch.open and (due or stopping):
                    started = time.monotonic()
                    writer.flush_offsets(s.offsets_topic, s.offsets_owner, batch.offsets)
                    self._made_durable(task, batch, time.monotonic() - started)
                    batch = PendingBatch()
                    last_flush = time.monotonic()
                if stopping:
                    return ExitCode.STOPPED
                if not records:
                    self._idle(task)
        finally:
            task.stop()
            writer.close()
