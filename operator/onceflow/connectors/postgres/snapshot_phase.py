"""A CDC task's first phase: the configured tables' rows as ``r`` records, read once
through exported snapshots, before the stream takes over.

Rows are read in primary-key chunks (``snapshot_reader``), and each record's offset
carries the last key written, so a task that dies mid-snapshot continues after that key
in a new segment (``snapshot_window``) instead of reading its tables again. Under
connector-defined boundaries each chunk asks to be a Kafka transaction of its own:
nothing else would end one before the whole snapshot was read.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import psycopg

from onceflow.api.connector import SourcePartition, SourceRecord, TaskContext
from onceflow.connectors.postgres.catalog import Table
from onceflow.connectors.postgres.change_records import (
    Change,
    change_value,
    position_fields,
    record_key,
    row_value,
)
from onceflow.connectors.postgres.outage import Outage
from onceflow.connectors.postgres.pgoutput import lsn_text
from onceflow.connectors.postgres.replication import ReplicationLostError
from onceflow.connectors.postgres.snapshot_reader import SegmentedSnapshot
from onceflow.connectors.postgres.snapshot_window import Key, SnapshotWindow

log = logging.getLogger(__name__)

SnapshotStart = tuple[str, Key | None]
"""The table to read and the last key already written (None: from its start)."""


def snapshot_start(
    stored: Mapping[str, Any], order: list[str], initial: bool
) -> SnapshotStart | None:
    """Where the snapshot resumes from the stored offset, or None when there is none
    to read: it is finished (or was never asked for) once an offset has no ``snapshot``
    key, and a task without an offset reads one only under ``snapshot: initial``."""
    if "snapshot" in stored:
        return stored["snapshot"]["table"], tuple(stored["snapshot"]["after"])
    if not stored and initial:
        return order[0], None
    return None


class SnapshotPhase:
    """Reads the snapshot chunk by chunk, from ``start`` on, until it is ``done``."""

    def __init__(
        self,
        context: TaskContext,
        config: Mapping[str, Any],
        conninfo: str,
        partition: SourcePartition,
        tables: Mapping[str, Table],
        window: SnapshotWindow,
        start: SnapshotStart,
    ) -> None:
        self.transactions = context.transactions
        self.partition = partition
        self.window = window
        self.chunk = min(config["snapshotChunkSize"], config["batchSize"])
        self.outage = Outage(config["reconnectTimeoutMs"] / 1000, context.secrets)
        self.reader = SegmentedSnapshot(
            conninfo, config["slot"], tables, window.order, window.segments, start
        )

    @property
    def done(self) -> bool:
        return self.reader.done

    def poll(self) -> list[SourceRecord]:
        try:
            table, rows = self.reader.next_rows(self.chunk)
        except (psycopg.OperationalError, ReplicationLostError) as error:
            # The export is gone with its session: continue in a new segment.
            log.warning("snapshot connection lost (%s); continuing in a new segment", error)
            self.reader.close()
            self.outage.pause_or_give_up("the snapshot could not be read again", error)
            return []
        self.outage.end()
        records = self._records(table, rows)
        if records and self.transactions is not None:
            self.transactions.commit_transaction()
        return records

    def _records(self, table: Table, rows: list[tuple[Any, ...]]) -> list[SourceRecord]:
        """A chunk's records. What every row repeats (the window, the segment's
        position) is worked out once: a chunk is read within one segment."""
        if not rows:
            return []
        window = self.window.to_offset()
        closing = position_fields(lsn_text(self.window.segments[-1].lsn), None, None)
        records = []
        for row in rows:
            key = table.values(row, table.key)
            read = Change("r", key, None, row_value(table, row), [])
            records.append(
                SourceRecord(
                    source_partition=self.partition,
                    source_offset={**window, "snapshot": {"table": table.name, "after": list(key)}},
                    key=record_key(table, key),
                    value=change_value(table.name, read, closing),
                )
            )
        return records

    def close(self) -> None:
        """Ends the open segment, if any; a stopped task's next start opens another."""
        self.reader.close()
