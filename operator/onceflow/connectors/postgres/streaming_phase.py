"""A CDC task's streaming phase: the configured tables' changes, decoded from the WAL
through the replication slot (``pgoutput``), once the snapshot (if any) is read.

Positions. While streaming, the offset is the commit position of the change's
transaction, the change's own WAL position and the record's index among those of that
position (a multi-row insert shares one; a key change makes two records), so a task
resumes inside a large transaction without repeating its start, whatever tables it is
configured for; the slot is told to keep WAL from the position of the last committed
record only once the Kafka transaction holding that record has committed
(``commit_record``), never before. A slot that confirmed more than was written would
drop changes for good; one that confirmed less merely re-sends changes this task skips
by their offset.

The stream starts where the slot was created, before the snapshot's segments, so it
carries again the changes a segment already shows; those are skipped
(``snapshot_window.already_read``), so no row is missed or repeated.

A broken replication connection (a terminated backend, a restart) is reopened here,
skipping what was already emitted; it gives up with a ``ConnectorError`` after
``reconnectTimeoutMs``.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import psycopg

from onceflow.api.connector import Behind, SourcePartition, SourceRecord, TaskContext
from onceflow.connectors.postgres.catalog import Table, key_after
from onceflow.connectors.postgres.change_records import (
    Change,
    change_value,
    changes_of,
    position_fields,
    record_key,
)
from onceflow.connectors.postgres.outage import Outage
from onceflow.connectors.postgres.pgoutput import (
    Begin,
    Commit,
    Delete,
    Insert,
    Keepalive,
    Relation,
    Truncate,
    Update,
    decode,
    epoch_ms,
    lsn_text,
    parse_lsn,
)
from onceflow.connectors.postgres.replication import ReplicationConnection, ReplicationLostError
from onceflow.connectors.postgres.settings import SettingError, connect, publication_name
from onceflow.connectors.postgres.slot_retention import slot_wal
from onceflow.connectors.postgres.snapshot_window import (
    Key,
    SnapshotWindow,
    already_read,
    window_end,
)

log = logging.getLogger(__name__)

POLL_TIMEOUT_S = 0.2
Position = tuple[int, int, int]
"""(commit LSN, the change's LSN, index of the record among that change LSN's)."""
BEFORE_ANYTHING: Position = (0, 0, -1)


class OpenTransaction:
    """The database transaction being streamed, with what each of its records
    repeats (its commit position as text, its commit time) worked out once."""

    __slots__ = ("begin", "closing", "commit_ms", "final_lsn", "lsn")

    def __init__(self, begin: Begin) -> None:
        self.begin = begin
        self.final_lsn = begin.final_lsn
        self.lsn = lsn_text(begin.final_lsn)
        self.commit_ms = epoch_ms(begin.commit_ts)
        self.closing = position_fields(self.lsn, begin.xid, self.commit_ms)


def stream_position(stored: Mapping[str, Any]) -> Position:
    """Where the stream resumes: after the record the stored offset names."""
    if "lsn" not in stored:
        return BEFORE_ANYTHING
    return parse_lsn(stored["lsn"]), parse_lsn(stored["change"]), int(stored["seq"])


class StreamingPhase:
    """Streams from the slot after ``position``. It owns ``sql``, the task's ordinary
    connection, from here on: it compares keys with it, measures the slot's WAL with it,
    and opens it again when it was lost."""

    def __init__(
        self,
        context: TaskContext,
        config: Mapping[str, Any],
        sql: psycopg.Connection[Any],
        conninfo: str,
        partition: SourcePartition,
        tables: Mapping[str, Table],
        window: SnapshotWindow,
        position: Position,
        delivered: Callable[[], bool],
    ) -> None:
        """``delivered``: whether every record the task has polled, the snapshot's too,
        has been committed; until then the slot must not move on past them."""
        self.transactions = context.transactions
        self.secrets = context.secrets
        self.url: str = config["url"]
        self.slot: str = config["slot"]
        self.publication = publication_name(config)
        self.batch_size: int = config["batchSize"]
        self.per_commit: int = config["transactionsPerCommit"]
        self.max_records: int = config["maxRecordsPerTransaction"]
        self.status_s = config["statusIntervalMs"] / 1000
        self.sql, self.conninfo = sql, conninfo
        self.partition, self.tables, self.window = partition, tables, window
        self.position = position
        self.delivered = delivered
        self.stream: ReplicationConnection | None = None
        self.outage = Outage(config["reconnectTimeoutMs"] / 1000, context.secrets)
        self.relations: dict[int, Relation] = {}
        self.txn: OpenTransaction | None = None
        self.change_at = (0, 0)
        """The current change's LSN and how many records it has made."""
        self.txns_since_boundary = 0
        self.records_since_boundary = 0
        """Records in the open Kafka transaction."""
        self.txn_records = 0
        """Records of the current database transaction since its start or its last piece."""
        self.held: SourceRecord | None = None
        self.received = self.confirmable = self.quiet = 0
        self.confirmed_text: str | None = None
        self.status_at = 0.0
        self.retained: int | None = None
        self.wal_behind: int | None = None

    def poll(self) -> list[SourceRecord]:
        out: list[SourceRecord] = []
        if self.stream is None and not self._reopen():
            return out
        assert self.stream is not None
        try:
            for frame in self.stream.frames(POLL_TIMEOUT_S, 2 * self.batch_size):
                if isinstance(frame, Keepalive):
                    self.received = max(self.received, frame.end)
                    self._quiet_at(frame.end, out)
                    if frame.reply_requested:
                        self._send_status()
                    continue
                self.received = max(self.received, frame.end)
                self._handle(decode(frame.payload), frame.start, out)
                if len(out) >= self.batch_size:
                    break
            if time.monotonic() - self.status_at >= self.status_s:
                self._send_status()
            self._commit_when_caught_up(out)
        except (ReplicationLostError, psycopg.OperationalError) as error:
            log.warning("replication connection lost (%s); reconnecting", error)
            self._drop_stream()
        return out

    def _reopen(self) -> bool:
        """Opens the stream; on failure, pauses and says so until the timeout ends it."""
        try:
            if self.sql.closed:
                self.sql = connect(self.url, self.secrets, f"onceflow-{self.slot}")
            stream = ReplicationConnection(self.conninfo)
            try:
                stream.start(self.slot, self.publication)
            except BaseException:
                stream.close()
                raise
        except (ReplicationLostError, psycopg.OperationalError, SettingError) as error:
            # A refused connection (SettingError naming config.url: a server restarting
            # refuses them for a moment) passes by; anything else (the slot dropped, a
            # privilege revoked) will not.
            self.outage.pause_or_give_up("replication did not resume", error)
            return False
        self.stream = stream
        self.outage.end()
        self.relations, self.txn = {}, None
        return True

    def _drop_stream(self) -> None:
        if self.stream is not None:
            self.stream.close()
        self.stream, self.txn = None, None
        self.outage.start()

    def _handle(self, message: object, lsn: int, out: list[SourceRecord]) -> None:
        """``lsn``: the WAL position of the change the message carries."""
        if isinstance(message, Relation):
            self.relations[message.oid] = message
        elif isinstance(message, Begin):
            # Numbering restarts with each transaction: one sent again after a
            # reconnect must number its records as it did the first time.
            self.txn, self.change_at, self.txn_records = OpenTransaction(message), (0, 0), 0
        elif isinstance(message, Commit):
            self._end_transaction(message, out)
        elif isinstance(message, (Insert, Update, Delete)):
            relation = self.relations[message.relation]
            table = self.tables.get(relation.qualified)
            if table is not None:
                for change in changes_of(message, relation, table):
                    self._change(table, change, self._next_position(lsn), out)
        elif isinstance(message, Truncate):
            for index, oid in enumerate(message.relations):
                table = self.tables.get(self.relations[oid].qualified)
                if table is not None:
                    self._truncate(table, (lsn, index), out)

    def _next_position(self, lsn: int) -> Position:
        """Records of one WAL position (a multi-row insert, a key change) are numbered."""
        assert self.txn is not None
        at, count = self.change_at
        index = count if at == lsn else 0
        self.change_at = (lsn, index + 1)
        return (self.txn.final_lsn, lsn, index)

    def _change(
        self,
        table: Table,
        change: Change,
        position: Position,
        out: list[SourceRecord],
    ) -> None:
        window = self.window
        if position <= self.position or (
            window.segments  # none once the stream passed the snapshot's last export
            and already_read(
                window.segments, table.name, change.key, position[0], window.order, self._key_after
            )
        ):
            return
        self._emit(table, change, record_key(table, change.key), position, out)

    def _truncate(self, table: Table, change: tuple[int, int], out: list[SourceRecord]) -> None:
        """A truncate before every segment's export is in all of them (nothing to say);
        one between them removed rows some segments still wrote."""
        assert self.txn is not None
        position = (self.txn.final_lsn, *change)
        if position <= self.position:
            return
        commit = self.txn.final_lsn
        segments = self.window.segments
        if table.name in self.window.order and segments and commit < window_end(segments):
            if commit < min(s.lsn for s in segments):
                return
            raise SettingError(
                "tables",
                f"{table.name} was truncated while its snapshot was read in segments; the "
                "rows already written cannot be matched to it. Start the source afresh "
                "(a new slot name)",
            )
        self._emit(table, Change("t", (), None, None, []), None, position, out)

    def _emit(
        self,
        table: Table,
        change: Change,
        key: bytes | None,
        position: Position,
        out: list[SourceRecord],
    ) -> None:
        txn = self.txn
        assert txn is not None
        self.position = position
        window = self.window
        if window.segments:
            window.streamed_to(position[0])
        lsn, commit_ms = txn.lsn, txn.commit_ms
        record = SourceRecord(
            source_partition=self.partition,
            source_offset={
                **window.to_offset(),
                "lsn": lsn,
                "change": lsn_text(position[1]),
                "seq": position[2],
            },
            key=key,
            value=change_value(table.name, change, txn.closing),
            timestamp_ms=commit_ms,
        )
        if self.held is not None:
            out.append(self.held)
            self._bound_transaction(self.held)
        # The last record of a transaction is known only when its Commit arrives, and a
        # boundary can only follow a record of the batch that carries it: hold one back.
        self.held = record

    def _bound_transaction(self, record: SourceRecord) -> None:
        """Inside a database transaction, ends the Kafka transaction after ``record``
        once the database transaction has made ``maxRecordsPerTransaction`` records
        since its start (or its last piece), or when it alone has kept the Kafka
        transaction open for half of the transaction timeout: a database transaction
        of any size then commits in pieces, and a restart resumes after the last piece
        by the change-level offset, instead of being aborted by the broker on every
        attempt while the slot keeps its WAL. Smaller transactions are never split: a
        consumer sees a transaction in more than one Kafka transaction only past the
        bound."""
        self.txn_records += 1
        self.records_since_boundary += 1
        transactions = self.transactions
        if transactions is None:
            return
        alone = self.txns_since_boundary == 0
        if self.txn_records >= self.max_records or (alone and transactions.running_long()):
            transactions.commit_transaction_after(record)
            self.txn_records = self.records_since_boundary = self.txns_since_boundary = 0

    def _end_transaction(self, commit: Commit, out: list[SourceRecord]) -> None:
        self.txn = None
        self.window.streamed_to(commit.commit_lsn)
        if self.held is None:
            self._quiet_at(commit.end_lsn, out)
            return
        out.append(self.held)
        self.records_since_boundary += 1
        self.txns_since_boundary += 1
        transactions = self.transactions
        if transactions is not None and (
            self.txns_since_boundary >= self.per_commit
            or self.records_since_boundary >= self.max_records
            or transactions.running_long()
        ):
            # Between whole database transactions: where transactionsPerCommit ends a
            # Kafka transaction, and where the bound ends one of many small ones.
            transactions.commit_transaction_after(self.held)
            self.txns_since_boundary = self.records_since_boundary = 0
        self.held = None

    def _commit_when_caught_up(self, out: list[SourceRecord]) -> None:
        """Under ``transactionsPerCommit`` > 1, a quiet stream ends the open transaction
        at the last whole database transaction instead of leaving it to time out."""
        caught_up = len(out) < self.batch_size and self.txn is None and self.held is None
        if caught_up and self.txns_since_boundary and self.transactions is not None:
            self.transactions.commit_transaction()
            self.txns_since_boundary = self.records_since_boundary = 0

    def _quiet_at(self, end: int, out: list[SourceRecord]) -> None:
        """With nothing written and not yet committed, the slot may move on to ``end``
        (changes of other tables, empty transactions) so the WAL is not kept forever.
        Never inside a transaction: a keepalive can arrive between its changes, with
        ``end`` past its commit, and confirming that would skip the rest of it."""
        idle = self.txn is None and self.held is None and not out
        if idle and self.delivered():
            self.quiet = max(self.quiet, end)

    def _key_after(self, table: str, key: Key, boundary: Key) -> bool:
        return key_after(self.sql, self.tables[table], key, boundary)

    def _send_status(self) -> None:
        if self.stream is not None:
            self.stream.send_status(self.received, max(self.confirmable, self.quiet))
            self.status_at = time.monotonic()
            self._measure_retention()

    def _measure_retention(self) -> None:
        """On the status schedule: what the slot keeps after what was just confirmed,
        and how much WAL the server wrote past what the task delivered."""
        try:
            self.retained, current = slot_wal(self.sql, self.slot)
        except psycopg.Error as error:  # a gauge must never stop the task
            log.debug("retained WAL not measured: %s", error)
            return
        self.wal_behind = max(0, current - max(self.confirmable, self.quiet))

    def retained_bytes(self) -> int | None:
        return self.retained

    def behind(self) -> Behind | None:
        return None if self.wal_behind is None else Behind(bytes=self.wal_behind)

    # -- commits -----------------------------------------------------------------

    def commit_record(self, record: SourceRecord) -> None:
        lsn = record.source_offset.get("lsn")
        if lsn is not None and lsn is not self.confirmed_text:
            # The commit position of the record's transaction: confirming it makes the
            # server send that transaction again after a restart (not skip it). A
            # transaction's records share one text: it is parsed once.
            self.confirmed_text = lsn
            self.confirmable = max(self.confirmable, parse_lsn(lsn))

    def commit(self) -> None:
        try:
            self._send_status()
        except ReplicationLostError as error:
            log.warning("replication connection lost (%s); reconnecting", error)
            self._drop_stream()

    def stop(self) -> None:
        """Confirms what was committed, then closes both connections."""
        if self.stream is not None:
            with contextlib.suppress(ReplicationLostError):
                self._send_status()
            self.stream.close()
        self.sql.close()
