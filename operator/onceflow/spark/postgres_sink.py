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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from onceflow.spark.query_identity import QueryIdentity

MARKERS_TABLE = "onceflow_sink_batches"


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


def _insert(target: PostgresTarget, columns: Sequence[str]) -> sql.Composed:
    statement = sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
        _table(target.table),
        sql.SQL(", ").join(sql.Identifier(c) for c in columns),
        sql.SQL(", ").join(sql.Placeholder() for _ in columns),
    )
    if not target.key:
        return statement
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
    return sql.SQL("{} ON CONFLICT ({}) {}").format(
        statement, sql.SQL(", ").join(sql.Identifier(k) for k in target.key), action
    )


def write_slice(
    target: PostgresTarget,
    batch_id: int,
    slice_id: int,
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
) -> int:
    """Writes one slice of one batch exactly once; returns rows written."""
    with psycopg.connect(target.dsn) as conn, conn.transaction():
        claimed = conn.execute(
            sql.SQL(
                "INSERT INTO {} (job, slice, batch_id) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING"
            ).format(sql.Identifier(MARKERS_TABLE)),
            (target.marker_job, slice_id, batch_id),
        ).rowcount
        if claimed == 0:
            return 0  # a replay of a batch this query's slice already committed
        if _written_before_markers_named_queries(conn, target, slice_id, batch_id):
            return 0
        batch = [tuple(row) for row in rows]
        if batch:
            with conn.cursor() as cursor:
                cursor.executemany(_insert(target, columns), batch)
        return len(batch)


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
