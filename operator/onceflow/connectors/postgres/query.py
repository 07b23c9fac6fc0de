"""``postgres`` in ``mode: incrementing`` and ``mode: timestamp+incrementing``: polling
queries, like Kafka Connect's JDBC source.

Each table is a source partition; the offset is the last row's ordering columns
(``incrementingColumn``, after ``timestampColumn`` in the second mode). A polling
source misses a row when a row with a smaller value commits after a larger one was
read, so a poll reads only up to a high-water mark it has made safe: it notes the
largest value, then waits until every transaction of the database that was running at
that moment has ended (their virtual transaction ids in ``pg_locks``, and prepared
transactions, both readable by any user), because only those can still commit a
smaller value. Rows whose ordering column is null are never read (they have no place
in the order). Under ``incrementing`` with values from a
sequence or identity column (``CACHE 1``, the default) this makes the mode exactly-once,
on a primary only: a hot standby lists none of the primary's transactions, so a task
pointed at one stops under ``exactlyOnceSupport: required`` and warns otherwise
(``server_checks.standby_problem``).

``timestamp+incrementing`` also sees updated rows (their timestamp moves), but a row
updated twice between polls shows only its last version and a row whose timestamp is
set backwards is never seen again: it is at-least-once at best, and declared so.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql

from onceflow.api.connector import SourceRecord, SourceTask, TaskContext
from onceflow.connectors.postgres.catalog import Table, describe, text_columns
from onceflow.connectors.postgres.change_records import record_key, row_value
from onceflow.connectors.postgres.server_checks import in_recovery, standby_problem
from onceflow.connectors.postgres.settings import (
    DEFAULTS,
    SettingError,
    connect,
    connection_lost,
)

log = logging.getLogger(__name__)

Values = tuple[str | None, ...]


@dataclass
class Polled:
    """One table's progress: the last row written, and a high-water mark waiting for
    the transactions that were running when it was taken."""

    table: Table
    order: tuple[str, ...]
    last: Values | None
    mark: Values | None = None
    waiting_for: list[str] = field(default_factory=list)
    due_at: float = 0.0


class QueryTask(SourceTask):
    def start(self, context: TaskContext) -> None:
        super().start(context)
        config = {**DEFAULTS, **context.config}
        self.batch_size: int = config["batchSize"]
        self.interval_s = config["pollIntervalMs"] / 1000
        order = tuple(
            c for c in (config["timestampColumn"], config["incrementingColumn"]) if c is not None
        )
        self.conn = connect(config["url"], context.secrets, "onceflow-query")
        try:
            # Asked again here, not only by the check: a restart can reach another
            # server behind the same url (a failover, a list of hosts).
            standby = standby_problem(config["mode"], in_recovery(self.conn))
            if standby is not None:
                log.warning("task %s: %s", context.task_id, context.refuse_or_warn(standby))
            self.tables = [self._polled(name, order) for name in config["tables"]]
        except psycopg.OperationalError as error:
            # Lost while starting (a terminated session, a server going down) is lost
            # like any other time: the task ends saying so, not with a traceback.
            self.conn.close()
            raise connection_lost(error) from None
        except BaseException:
            self.conn.close()
            raise
        self.next = 0

    def _polled(self, name: str, order: tuple[str, ...]) -> Polled:
        table = describe(self.conn, name, cdc=False)
        for column, setting in zip(
            order, ("timestampColumn", "incrementingColumn")[-len(order) :], strict=True
        ):
            if column not in table.columns:
                raise SettingError(setting, f"{table.name} has no column {column!r}")
        stored = self.context.offsets.offset({"table": table.name})
        last = tuple(stored["after"]) if stored else None
        return Polled(table, order, last)

    def poll(self) -> list[SourceRecord]:
        try:
            for _ in range(len(self.tables)):
                polled = self.tables[self.next]
                self.next = (self.next + 1) % len(self.tables)
                if records := self._poll_table(polled):
                    return records
        except psycopg.OperationalError as error:
            raise connection_lost(error) from None
        return []

    def _poll_table(self, polled: Polled) -> list[SourceRecord]:
        now = time.monotonic()
        if polled.mark is None:
            if now < polled.due_at:
                return []
            polled.due_at = now + self.interval_s
            self._take_mark(polled)
            return []
        if polled.waiting_for and self._still_running(polled.waiting_for):
            return []
        polled.waiting_for = []
        rows = self._rows_up_to_mark(polled)
        if len(rows) < self.batch_size:
            polled.mark = None
        return [self._record(polled, row) for row in rows]

    def _take_mark(self, polled: Polled) -> None:
        t = polled.table
        found = self.conn.execute(
            sql.SQL("SELECT {} FROM {} ORDER BY {} LIMIT 1").format(
                sql.SQL(", ").join(
                    sql.SQL("{}::text").format(sql.Identifier(c)) for c in polled.order
                ),
                t.identifier,
                sql.SQL(", ").join(
                    sql.SQL("{} DESC NULLS LAST").format(t.column_list([c])) for c in polled.order
                ),
            )
        ).fetchone()
        if (
            found is None
            or None in found
            or (polled.last is not None and tuple(found) == polled.last)
        ):
            return  # empty, only nulls (never read: no order), or nothing new
        # Read after the mark: a transaction running when the mark was read is either
        # still running now (and waited for) or committed (and seen by the next read).
        # A prepared (two-phase) transaction has given up its virtual id: its gid counts.
        running = self.conn.execute(
            "SELECT l.virtualxid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
            " WHERE l.locktype = 'virtualxid' AND l.pid <> pg_backend_pid()"
            " AND a.datname = current_database()"
            " UNION ALL SELECT 'prepared:' || gid FROM pg_prepared_xacts"
            " WHERE database = current_database()"
        ).fetchall()
        polled.mark = tuple(found)
        polled.waiting_for = [v for (v,) in running]

    def _still_running(self, vxids: list[str]) -> bool:
        row = self.conn.execute(
            "SELECT (SELECT count(*) FROM pg_locks"
            "        WHERE locktype = 'virtualxid' AND virtualxid = ANY(%s))"
            " + (SELECT count(*) FROM pg_prepared_xacts WHERE 'prepared:' || gid = ANY(%s))",
            (vxids, vxids),
        ).fetchone()
        return bool(row and row[0])

    def _rows_up_to_mark(self, polled: Polled) -> list[tuple[Any, ...]]:
        t = polled.table
        order = t.column_list(polled.order)
        where = [sql.SQL("({}) <= {}").format(order, t.typed(polled.order))]
        params: list[Any] = list(polled.mark or ())
        if polled.last is not None:
            where.append(sql.SQL("({}) > {}").format(order, t.typed(polled.order)))
            params += polled.last
        query = sql.SQL("SELECT {} FROM {} WHERE {} ORDER BY {} LIMIT %s").format(
            text_columns(t), t.identifier, sql.SQL(" AND ").join(where), order
        )
        return self.conn.execute(query, [*params, self.batch_size]).fetchall()

    def _record(self, polled: Polled, row: tuple[Any, ...]) -> SourceRecord:
        t = polled.table
        polled.last = t.values(row, polled.order)
        return SourceRecord(
            source_partition={"table": t.name},
            source_offset={"after": list(polled.last)},
            key=record_key(t, t.values(row, t.key)) if t.key else None,
            value=row_value(t, row).encode(),
        )

    def stop(self) -> None:
        self.conn.close()
