"""Onceflow's exactly-once PostgreSQL sink for Structured Streaming (``foreachBatch``).

Rows are split into ``parallelism`` slices by a stable hash (so a replayed batch
splits identically); each slice writes its rows and the marker ``(job, slice, batch)``
in one database transaction, where ``job`` names the streaming query too
(``<namespace>/<job>@<query id>``): a new or reset checkpoint restarts batch ids at 0
and must not find the old query's markers. The marker is inserted first with ``ON
CONFLICT DO NOTHING``: a replayed slice finds it and writes nothing, and two concurrent
attempts of one slice serialise on the marker's primary key.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from onceflow.spark.query_identity import QueryIdentity
from onceflow.spark.worker_cache import KeptBetweenBatches

MARKERS_TABLE = "onceflow_sink_batches"
# Connections a Python worker keeps between batches, by DSN.
HELD_CONNECTIONS: KeptBetweenBatches[psycopg.Connection[Any]] = KeptBetweenBatches()


@dataclass(frozen=True)
class PostgresTarget:
    dsn: str
    table: str
    key: tuple[str, ...]
    job: str
    slices: int
    query: str = ""
    """The streaming query's id, set per batch once the query is bound."""

    @property
    def marker_job(self) -> str:
        return f"{self.job}@{self.query}"


def _table(name: str) -> sql.Composable:
    return sql.SQL(".").join(sql.Identifier(part) for part in name.split("."))


def ensure_markers(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} (job text NOT NULL, slice int NOT NULL, "
                "batch_id bigint NOT NULL, committed_at timestamptz NOT NULL DEFAULT now(), "
                "PRIMARY KEY (job, slice, batch_id))"
            ).format(sql.Identifier(MARKERS_TABLE))
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
    """Writes one slice of one batch exactly once; returns rows written."""
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
            written = (
                _write_rows(conn, target, columns, rows)
                if claimed
                and not _written_before_markers_named_queries(conn, target, slice_id, batch_id)
                else 0
            )
    except BaseException:
        conn.close()
        raise
    HELD_CONNECTIONS.keep(conn, target.dsn)
    return written


def _written_before_markers_named_queries(
    conn: psycopg.Connection[Any], target: PostgresTarget, slice_id: int, batch_id: int
) -> bool:
    """A batch in flight when the sink was upgraded left a marker under the bare job
    name; its replay must still be skipped. Only the last such batch can be in flight:
    the bare job's earlier batches must not make a reset checkpoint's batches (which
    restart at 0) look written. Newer markers never use the bare name."""
    found = conn.execute(
        sql.SQL("SELECT max(batch_id) FROM {} WHERE job = %s AND slice = %s").format(
            sql.Identifier(MARKERS_TABLE)
        ),
        (target.job, slice_id),
    ).fetchone()
    return found is not None and found[0] == batch_id


class ExactlyOncePostgresSink:
    def __init__(self, target: PostgresTarget) -> None:
        self.target = target
        self.query = QueryIdentity()
        ensure_markers(target.dsn)

    def __call__(self, frame: Any, batch_id: int) -> None:
        from pyspark import TaskContext
        from pyspark.sql import functions as spark_sql

        target = dataclasses.replace(self.target, query=self.query.wait())
        columns = list(frame.columns)
        # Slices by the key columns (the whole row for appends): Spark's Murmur3 in the
        # JVM, so a replayed batch gives every slice the same rows without a Python pass.
        spread = [spark_sql.col(c) for c in (target.key or columns)]
        sliced = frame.repartition(target.slices, *spread)

        def write(rows: Iterable[Any]) -> None:
            context = TaskContext.get()
            assert context is not None
            write_slice(target, batch_id, context.partitionId(), columns, rows)

        sliced.foreachPartition(write)
