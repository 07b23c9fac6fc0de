"""Reading the initial snapshot: tables in the configured order, each in primary-key
chunks, through a snapshot exported by a temporary slot at a known WAL position.

The export lives only as long as the session that made it, so a lost connection (or
a restarted task) continues after the last key taken in a new segment with an export
of its own; ``snapshot_window`` says which streamed changes each segment already
shows. The segments list is the one the task's offsets carry.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from onceflow.connectors.postgres.catalog import Table, chunk_query
from onceflow.connectors.postgres.pgoutput import lsn_text
from onceflow.connectors.postgres.replication import ReplicationConnection
from onceflow.connectors.postgres.settings import SettingError
from onceflow.connectors.postgres.snapshot_window import Key, Segment

log = logging.getLogger(__name__)


@dataclass
class _Export:
    """The exporting session must stay open (and idle) while its snapshot is read."""

    exporter: ReplicationConnection
    reader: psycopg.Connection[Any]

    def close(self) -> None:
        """Both sessions, whatever state a lost connection left them in."""
        for close in (self.reader.close, self.exporter.close):
            with contextlib.suppress(psycopg.Error):
                close()


class SegmentedSnapshot:
    def __init__(
        self,
        conninfo: str,
        slot: str,
        tables: Mapping[str, Table],
        order: list[str],
        segments: list[Segment],
        start: tuple[str, Key | None],
    ) -> None:
        self.conninfo, self.slot, self.tables, self.order = conninfo, slot, tables, order
        self.segments = segments
        self.reading: tuple[str, Key | None] | None = start
        """The table being read and the last key taken; None once every table is read."""
        self.export: _Export | None = None

    @property
    def done(self) -> bool:
        return self.reading is None

    def next_rows(self, limit: int) -> tuple[Table, list[tuple[Any, ...]]]:
        """The next chunk (text values) and its table; no rows once the snapshot is over.
        Connection errors reach the caller, and the next call starts a new segment."""
        assert self.reading is not None
        if self.export is None:
            self.export = self._open_segment(*self.reading)
        while True:
            name, after = self.reading
            table = self.tables.get(name)
            if table is None:
                raise SettingError(
                    "tables",
                    f"{name} was removed while its snapshot was read; put it back until "
                    "the snapshot has finished",
                )
            rows = self.export.reader.execute(
                chunk_query(table, after is not None), [*(after or ()), limit]
            ).fetchall()
            if rows:
                self.reading = (name, table.values(rows[-1], table.key))
                return table, rows
            at = self.order.index(name)
            if at + 1 < len(self.order):
                self.reading = (self.order[at + 1], None)
                continue
            log.info("snapshot finished in %d segment(s); streaming", len(self.segments))
            self.close()
            self.reading = None
            return table, []

    def _open_segment(self, table: str, after: Key | None) -> _Export:
        exporter = ReplicationConnection(self.conninfo)
        try:
            name = f"{self.slot}_snapshot_{uuid.uuid4().hex[:12]}"
            created = exporter.create_slot(name, temporary=True, export=True)
            reader = psycopg.connect(self.conninfo)
            reader.read_only = True
            reader.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            reader.execute(
                sql.SQL("SET TRANSACTION SNAPSHOT {}").format(sql.Literal(created.snapshot))
            )
        except BaseException:
            exporter.close()
            raise
        self.segments.append(Segment(table, after, created.consistent_point))
        log.info(
            "snapshot segment %d from %s after %s, as of %s",
            len(self.segments),
            table,
            after,
            lsn_text(created.consistent_point),
        )
        return _Export(exporter, reader)

    def close(self) -> None:
        """Ends the open segment (a lost one too): the next read opens another."""
        if self.export is not None:
            self.export.close()
            self.export = None
