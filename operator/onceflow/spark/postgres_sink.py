"""Onceflow's exactly-once PostgreSQL sink for Structured Streaming (``foreachBatch``).

Rows are split into slices by Spark's Murmur3 of the key columns (the whole row for
appends); each slice writes its rows and the marker ``(job, slice, batch)`` in one
database transaction, where ``job`` names the streaming query too
(``<namespace>/<job>@<query id>``): a new or reset checkpoint restarts batch ids at 0
and must not find the old query's markers. The marker is inserted first with ``ON
CONFLICT DO NOTHING``: a replayed slice finds it and writes nothing, and two concurrent
attempts of one slice serialise on the marker's primary key.

A slice number means something only in one layout (slice count and spread columns), so
the driver records each batch's layout before any slice is written and writes the batch
in the layout recorded for it: a batch in flight when ``parallelism`` or ``key`` changed
is finished as it started (``logic.slice_markers``). A driver's first batch also adopts
or retires markers an older sink version left under the bare job name.

The layouts live in a table of their own rather than in new columns of the markers
table: ``CREATE TABLE IF NOT EXISTS`` needs no lock on a table that running drivers of
other jobs write, nor ownership of it, and sink versions that do not know the layouts
keep reading their markers unchanged.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from onceflow.eos.worker_cache import KeptBetweenBatches
from onceflow.logic.slice_markers import (
    LegacyMarkers,
    SliceLayout,
    adopt_legacy_markers,
    layout_to_write,
)
from onceflow.spark.checkpoint_identity import CheckpointIdentity
from onceflow.spark.query_identity import QueryIdentity

log = logging.getLogger(__name__)

MARKERS_TABLE = "onceflow_sink_batches"
LAYOUTS_TABLE = "onceflow_sink_layouts"
# Connections a Python worker keeps between batches, by DSN.
HELD_CONNECTIONS: KeptBetweenBatches[psycopg.Connection[Any]] = KeptBetweenBatches()


@dataclass(frozen=True)
class PostgresTarget:
    dsn: str
    table: str
    key: tuple[str, ...]
    job: str
    slices: int
    """``parallelism``: the slice count of batches started from now on."""
    query: str = ""
    """The streaming query's id, set per batch once the query is bound."""
    earlier_job: str | None = None
    """The job the checkpoint was last written as, if another writer
    (``logic.sink_identity``; a renamed prefix alone leaves ``job`` as it is): the
    batch an earlier driver left in flight may have been committed under its name."""

    @property
    def marker_job(self) -> str:
        return f"{self.job}@{self.query}"


def _table(name: str) -> sql.Composable:
    return sql.SQL(".").join(sql.Identifier(part) for part in name.split("."))


def ensure_markers(dsn: str) -> None:
    """Creates the markers and layouts tables if missing; existing ones are left as
    they are (a sink version before layouts created only the markers table)."""
    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        # Drivers of several jobs start together (a new database, an operator upgrade):
        # concurrent CREATE TABLE IF NOT EXISTS can still fail on the catalog's unique
        # index, so one creates while the others wait and then find the tables.
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (MARKERS_TABLE,))
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} (job text NOT NULL, slice int NOT NULL, "
                "batch_id bigint NOT NULL, committed_at timestamptz NOT NULL DEFAULT now(), "
                "PRIMARY KEY (job, slice, batch_id))"
            ).format(sql.Identifier(MARKERS_TABLE))
        )
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} (job text NOT NULL, batch_id bigint NOT NULL, "
                "slices int NOT NULL, spread text[] NOT NULL, "
                "recorded_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (job, batch_id))"
            ).format(sql.Identifier(LAYOUTS_TABLE))
        )


# Rows are copied into a session's staging table, then merged in one statement: COPY
# costs a fraction of a parameterised INSERT per row. The row number keeps the last
# of a key's rows in a batch, as row-by-row upserts would.
ROW_NUMBER = "_onceflow_row"


def _stage(conn: psycopg.Connection[Any], target: PostgresTarget, columns: Sequence[str]) -> str:
    """The session's staging table for these columns of the target: their types only
    (no constraints, no other columns), emptied by every commit."""
    digest = hashlib.sha256(repr((target.table, tuple(columns))).encode()).hexdigest()[:16]
    name = f"onceflow_stage_{digest}"
    conn.execute(
        sql.SQL(
            "CREATE TEMP TABLE IF NOT EXISTS {} ON COMMIT DELETE ROWS AS SELECT {} FROM {} "
            "WITH NO DATA"
        ).format(sql.Identifier(name), _names(columns), _table(target.table))
    )
    conn.execute(
        sql.SQL(
            "ALTER TABLE {} ADD COLUMN IF NOT EXISTS {} bigint GENERATED ALWAYS AS IDENTITY"
        ).format(sql.Identifier(name), sql.Identifier(ROW_NUMBER))
    )
    return name


def _names(columns: Sequence[str]) -> sql.Composable:
    return sql.SQL(", ").join(sql.Identifier(c) for c in columns)


def _copy(
    conn: psycopg.Connection[Any],
    table: sql.Composable,
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
) -> int:
    copied = 0
    with (
        conn.cursor() as cursor,
        cursor.copy(sql.SQL("COPY {} ({}) FROM STDIN").format(table, _names(columns))) as copy,
    ):
        for row in rows:
            copy.write_row(row)
            copied += 1
    return copied


def _write_rows(
    conn: psycopg.Connection[Any],
    target: PostgresTarget,
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
) -> int:
    """Appends copy straight into the table; upserts merge from the staging table."""
    if not target.key:
        return _copy(conn, _table(target.table), columns, rows)
    stage = _stage(conn, target, columns)
    copied = _copy(conn, sql.Identifier(stage), columns, rows)
    if not copied:
        return 0
    keys = sql.SQL(", ").join(sql.Identifier(k) for k in target.key)
    updates = [c for c in columns if c not in target.key]
    action = (
        sql.SQL("DO UPDATE SET {}").format(
            sql.SQL(", ").join(
                sql.SQL("{} = EXCLUDED.{}").format(sql.Identifier(c), sql.Identifier(c))
                for c in updates
            )
        )
        if updates
        else sql.SQL("DO NOTHING")
    )
    # A NULL in the key never conflicts, so such rows are each inserted, as one by one.
    keyed = sql.SQL(" AND ").join(
        sql.SQL("{} IS NOT NULL").format(sql.Identifier(k)) for k in target.key
    )
    conn.execute(
        sql.SQL(
            "INSERT INTO {table} ({names}) (SELECT {names} FROM (SELECT DISTINCT ON ({keys}) * "
            "FROM {stage} WHERE {keyed} ORDER BY {keys}, {row} DESC) AS latest UNION ALL "
            "SELECT {names} FROM {stage} WHERE NOT ({keyed})) ON CONFLICT ({keys}) {action}"
        ).format(
            table=_table(target.table),
            names=_names(columns),
            keys=keys,
            stage=sql.Identifier(stage),
            keyed=keyed,
            row=sql.Identifier(ROW_NUMBER),
            action=action,
        )
    )
    return copied


def _connection(dsn: str) -> psycopg.Connection[Any]:
    """The connection this worker kept, if it still answers; else a new one."""
    kept = HELD_CONNECTIONS.take(dsn)
    if kept is not None:
        try:
            kept.execute("SELECT 1")
            return kept
        except psycopg.Error:
            kept.close()
    # Autocommit: the ping must not open a transaction that `transaction()` would then
    # only nest a savepoint in (never committed); each write is its own BEGIN/COMMIT.
    return psycopg.connect(dsn, autocommit=True)


def write_slice(
    target: PostgresTarget,
    batch_id: int,
    slice_id: int,
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
) -> int:
    """Writes one slice of one batch exactly once; returns rows written. The rows are
    the slice's in the layout the driver recorded for the batch (``start_batch``)."""
    conn = _connection(target.dsn)
    try:
        with conn.transaction():
            claimed = conn.execute(
                sql.SQL(
                    "INSERT INTO {} (job, slice, batch_id) VALUES (%s, %s, %s) "
                    "ON CONFLICT DO NOTHING"
                ).format(sql.Identifier(MARKERS_TABLE)),
                (target.marker_job, slice_id, batch_id),
            ).rowcount
            # Claimed, unless a replay of a batch this query's slice already committed.
            written = _write_rows(conn, target, columns, rows) if claimed else 0
    except BaseException:
        conn.close()
        raise
    HELD_CONNECTIONS.keep(conn, target.dsn)
    return written


def _legacy_markers(
    conn: psycopg.Connection[Any], target: PostgresTarget, batch_id: int
) -> LegacyMarkers:
    markers = sql.Identifier(MARKERS_TABLE)
    found = conn.execute(
        sql.SQL("SELECT max(batch_id) FROM {} WHERE job = %s").format(markers), (target.job,)
    ).fetchone()
    last = None if found is None else found[0]
    if last is None:
        return LegacyMarkers(last_batch=None, named_elsewhere=False)
    # Scans the table (a prefix of a text key uses no index under most collations), but
    # only while bare markers exist: the first batch of the job's first upgraded driver.
    named = conn.execute(
        sql.SQL(
            "SELECT EXISTS (SELECT 1 FROM {} WHERE starts_with(job, %s) "
            "AND NOT (job = %s AND batch_id = %s))"
        ).format(markers),
        (f"{target.job}@", target.marker_job, batch_id),
    ).fetchone()
    return LegacyMarkers(last_batch=int(last), named_elsewhere=bool(named and named[0]))


def _settle_legacy_markers(
    conn: psycopg.Connection[Any], target: PostgresTarget, batch_id: int
) -> None:
    """Adopts the bare-job markers of a batch this query had in flight across the
    upgrade, and retires them all (``logic.slice_markers``)."""
    adoption = adopt_legacy_markers(_legacy_markers(conn, target, batch_id), target.query, batch_id)
    if not adoption.retire:
        return
    markers = sql.Identifier(MARKERS_TABLE)
    with conn.transaction():
        if adoption.adopt_batch is not None:
            conn.execute(
                sql.SQL(
                    "INSERT INTO {markers} (job, slice, batch_id, committed_at) "
                    "SELECT %s, slice, batch_id, committed_at FROM {markers} "
                    "WHERE job = %s AND batch_id = %s ON CONFLICT DO NOTHING"
                ).format(markers=markers),
                (target.marker_job, target.job, adoption.adopt_batch),
            )
            log.warning(
                "postgres sink %s: batch %s was in flight when the sink was upgraded; its "
                "slices committed then are taken as query %s's",
                target.job,
                batch_id,
                target.query,
            )
        retired = conn.execute(
            sql.SQL("DELETE FROM {} WHERE job = %s").format(markers), (target.job,)
        ).rowcount
    log.warning(
        "postgres sink %s: retired %s batch markers from before markers named their "
        "query; no later query can take its batches for written",
        target.job,
        retired,
    )


def _recorded_layout(
    conn: psycopg.Connection[Any], target: PostgresTarget, batch_id: int, wanted: SliceLayout
) -> SliceLayout:
    """Records ``wanted`` as the batch's layout unless one is recorded; returns the
    batch's layout as recorded (committed before any slice is written)."""
    layouts = sql.Identifier(LAYOUTS_TABLE)
    conn.execute(
        sql.SQL(
            "INSERT INTO {} (job, batch_id, slices, spread) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT DO NOTHING"
        ).format(layouts),
        (target.marker_job, batch_id, wanted.slices, list(wanted.spread)),
    )
    found = conn.execute(
        sql.SQL("SELECT slices, spread FROM {} WHERE job = %s AND batch_id = %s").format(layouts),
        (target.marker_job, batch_id),
    ).fetchone()
    if found is None:
        raise RuntimeError(
            f"the layout of batch {batch_id} of {target.marker_job} vanished from "
            f"{LAYOUTS_TABLE} right after it was recorded"
        )
    return SliceLayout(int(found[0]), tuple(found[1]))


def _started_as_earlier_job(
    conn: psycopg.Connection[Any], target: PostgresTarget, batch_id: int
) -> PostgresTarget | None:
    """The target under the job name the checkpoint was last written as, if the batch
    was started there: it is finished under that name, whose markers its slices
    committed so far (and any zombie slice of the earlier driver) claim."""
    if target.earlier_job in (None, target.job):
        return None  # the markers name the namespace and job, not the prefix
    earlier = dataclasses.replace(target, job=target.earlier_job, earlier_job=None)
    found = conn.execute(
        sql.SQL("SELECT 1 FROM {} WHERE job = %s AND batch_id = %s").format(
            sql.Identifier(LAYOUTS_TABLE)
        ),
        (earlier.marker_job, batch_id),
    ).fetchone()
    return earlier if found is not None else None


def start_batch(
    target: PostgresTarget, batch_id: int, columns: Sequence[str], first_of_driver: bool
) -> tuple[PostgresTarget, SliceLayout]:
    """The driver's step before a batch's slices run: at its first batch (the only one
    an earlier driver can have left in flight) it settles markers of the bare-job
    format and looks for the batch under the job's earlier name; every batch's layout
    is recorded, or read back if it was recorded by the driver that started the batch.
    Returns where to write the batch, and in which layout."""
    wanted = SliceLayout.of_sink(target.slices, target.key, columns)
    conn = _connection(target.dsn)
    try:
        if first_of_driver:
            _settle_legacy_markers(conn, target, batch_id)
            target = _started_as_earlier_job(conn, target, batch_id) or target
        layout = layout_to_write(
            _recorded_layout(conn, target, batch_id, wanted), batch_id, columns, wanted
        )
    except BaseException:
        conn.close()
        raise
    HELD_CONNECTIONS.keep(conn, target.dsn)
    if layout != wanted:
        log.warning(
            "postgres sink %s: batch %s started as %s and is finished so; later batches "
            "are split into %s",
            target.marker_job,
            batch_id,
            layout.describe(),
            wanted.describe(),
        )
    return target, layout


class ExactlyOncePostgresSink:
    def __init__(
        self, target: PostgresTarget, checkpoint: CheckpointIdentity | None = None
    ) -> None:
        self.target = target
        self.checkpoint = checkpoint
        self.query = QueryIdentity()
        self.first_batch = True
        """Until a batch started: the next one may be one an earlier driver left."""
        ensure_markers(target.dsn)

    def __call__(self, frame: Any, batch_id: int) -> None:
        from pyspark import TaskContext
        from pyspark.sql import functions as spark_sql

        target = dataclasses.replace(self.target, query=self.query.wait())
        columns = list(frame.columns)
        target, layout = start_batch(target, batch_id, columns, self.first_batch)
        self.first_batch = False
        if self.checkpoint is not None and target.job == self.target.job:
            self.checkpoint.claim()
        # Spark's Murmur3 in the JVM: a replay in the same layout gives every slice the
        # same rows without a Python pass.
        sliced = frame.repartition(layout.slices, *(spark_sql.col(c) for c in layout.spread))

        def write(rows: Iterable[Any]) -> None:
            context = TaskContext.get()
            assert context is not None
            write_slice(target, batch_id, context.partitionId(), columns, rows)

        sliced.foreachPartition(write)
