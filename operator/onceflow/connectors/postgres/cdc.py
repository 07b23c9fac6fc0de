"""``postgres`` in ``mode: cdc``: the configured tables' changes, decoded from the WAL
through a replication slot (``pgoutput``), after an exactly-once initial snapshot.

``CdcTask`` prepares the source (tables, publication, slot) and reads where the stored
offset left it, then runs two phases in turn over one slot: the snapshot
(``snapshot_phase``), when configured and not finished, and then the stream
(``streaming_phase``), for good. Both write their records' offsets with the
snapshot's window (``snapshot_window.SnapshotWindow``), so one offset says where either
phase stands:

- the snapshot: ``{tables, segments, snapshot: {table, after}}``, the last key written;
- the stream: ``{tables, [segments], lsn, change, seq}``, the last change written.

The source partition is the database system and the slot.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from onceflow.api.connector import (
    Behind,
    ConnectorError,
    SourceOffset,
    SourcePartition,
    SourceRecord,
    SourceTask,
    TaskContext,
)
from onceflow.connectors.postgres.catalog import Table, describe
from onceflow.connectors.postgres.publication import ensure_publication
from onceflow.connectors.postgres.replication import (
    ReplicationConnection,
    ReplicationLostError,
)
from onceflow.connectors.postgres.server_checks import (
    refused_replication,
    replication_problems,
    slot_problem,
)
from onceflow.connectors.postgres.settings import (
    DEFAULTS,
    SettingError,
    connect,
    conninfo,
    publication_name,
)
from onceflow.connectors.postgres.snapshot_phase import SnapshotPhase, snapshot_start
from onceflow.connectors.postgres.snapshot_window import Segment, SnapshotWindow
from onceflow.connectors.postgres.streaming_phase import StreamingPhase, stream_position

log = logging.getLogger(__name__)


class CdcTask(SourceTask):
    """Runs the snapshot phase until it is done, then hands over to the streaming
    phase. It keeps what spans both: how many records were polled and how many
    committed, since the slot may move on past unwritten changes only once every
    record, the snapshot's too, is committed."""

    def start(self, context: TaskContext) -> None:
        super().start(context)
        config = {**DEFAULTS, **context.config}
        self.slot: str = config["slot"]
        self.secrets = context.secrets
        self.conninfo = conninfo(config["url"], context.secrets, f"onceflow-{self.slot}")
        self.sql = connect(config["url"], context.secrets, f"onceflow-{self.slot}")
        self.emitted = self.committed = 0
        try:
            tables, partition, stored = self._prepare(config)
            self._resume(config, tables, partition, stored or {})
        except BaseException:
            self.sql.close()
            raise

    def _prepare(
        self, config: Mapping[str, Any]
    ) -> tuple[dict[str, Table], SourcePartition, SourceOffset | None]:
        """Readies the server for both phases (the tables described, the publication,
        the slot); returns the tables, the partition and its stored offset."""
        tables: dict[str, Table] = {}
        for name in [str(t) for t in config["tables"]]:
            table = describe(self.sql, name)
            tables[table.name] = table
        if problems := replication_problems(self.sql):
            raise problems[0]
        ensure_publication(self.sql, publication_name(config), list(tables.values()))
        replication = self._replication()
        try:
            ((system, *_rest),) = replication.command("IDENTIFY_SYSTEM", "url")
            partition = {"system": system, "slot": self.slot}
            stored = self.context.offsets.offset(partition)
            self._ensure_slot(replication, stored)
        finally:
            replication.close()
        return tables, partition, stored

    def _resume(
        self,
        config: Mapping[str, Any],
        tables: dict[str, Table],
        partition: SourcePartition,
        stored: SourceOffset,
    ) -> None:
        """Both phases, from where the stored offset left them."""
        # Offsets name the snapshotted tables in the snapshot's order, which a later
        # config may not keep; a table added since was never snapshotted.
        initial = config["snapshot"] == "initial"
        order: list[str] = list(stored.get("tables", tables))
        if initial and (added := [t for t in tables if t not in order]):
            raise SettingError(
                "tables",
                f"{', '.join(added)} added after the initial snapshot of "
                f"{', '.join(order)}: its rows would never be read; capture it with "
                "a source of its own (another slot), or set snapshot: never",
            )
        window = SnapshotWindow(order, [Segment.from_offset(s) for s in stored.get("segments", [])])
        self.streaming = StreamingPhase(
            self.context,
            config,
            self.sql,
            self.conninfo,
            partition,
            tables,
            window,
            stream_position(stored),
            delivered=lambda: self.emitted == self.committed,
        )
        start = snapshot_start(stored, order, initial)
        self.snapshot = (
            None
            if start is None
            else SnapshotPhase(
                self.context, config, self.conninfo, partition, tables, window, start
            )
        )

    def _replication(self) -> ReplicationConnection:
        try:
            return ReplicationConnection(self.conninfo)
        except ReplicationLostError as error:
            raise refused_replication(str(error), self.secrets) from None

    def _ensure_slot(
        self, replication: ReplicationConnection, stored: Mapping[str, Any] | None
    ) -> None:
        if problem := slot_problem(self.sql, self.slot):
            raise problem
        exists = self.sql.execute(
            "SELECT 1 FROM pg_replication_slots WHERE slot_name = %s", (self.slot,)
        ).fetchone()
        if exists is not None:
            return
        if stored is not None:
            raise ConnectorError(
                f"config.slot: slot {self.slot!r} no longer exists, so the changes committed "
                "since this source last wrote are gone from the WAL it kept; to start over "
                "(a new snapshot), give the source a new slot name"
            )
        replication.create_slot(self.slot, temporary=False, export=False)
        log.info("created replication slot %s", self.slot)

    def poll(self) -> list[SourceRecord]:
        if self.snapshot is None:
            records = self.streaming.poll()
        else:
            records = self.snapshot.poll()
            if self.snapshot.done:
                self.snapshot = None  # handed over: the stream reads from the next poll
        self.emitted += len(records)
        return records

    def commit_record(self, record: SourceRecord) -> None:
        self.committed += 1
        self.streaming.commit_record(record)

    def commit(self) -> None:
        self.streaming.commit()

    def stop(self) -> None:
        if self.snapshot is not None:
            self.snapshot.close()
        self.streaming.stop()

    def retained_bytes(self) -> int | None:
        return self.streaming.retained_bytes()

    def behind(self) -> Behind | None:
        return self.streaming.behind()
