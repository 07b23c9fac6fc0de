"""The Postgres sink's slice writes on a real server: rows copied and merged as the
row-by-row upsert would have applied them, replays skipped, and the connection a
worker keeps reused while it answers and replaced once it does not."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from onceflow.spark.postgres_sink import (
    HELD_CONNECTIONS,
    PostgresTarget,
    ensure_markers,
    write_slice,
)

pytestmark = pytest.mark.postgres


def _table(dsn: str, ddl: str) -> str:
    name = f"sink_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {name} ({ddl})")
    ensure_markers(dsn)
    return name


def _rows(dsn: str, table: str) -> list[tuple[object, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()


def _backend(dsn: str) -> int:
    kept = HELD_CONNECTIONS.take(dsn)
    assert kept is not None, "the worker kept no connection"
    HELD_CONNECTIONS.keep(kept, dsn)
    return kept.info.backend_pid


def test_an_upsert_batch_keeps_each_keys_last_row_and_a_replay_writes_nothing(
    postgres_dsn: str,
) -> None:
    # A unique key that allows NULL: NULL keys never conflict, so each such row stays.
    table = _table(postgres_dsn, "id text UNIQUE, n int NOT NULL, note text DEFAULT 'x'")
    target = PostgresTarget(postgres_dsn, table, ("id",), f"job-{table}", 2, query="q")
    batch = [("a", 1), ("b", 1), ("a", 2), (None, 7), (None, 8), ("b", 3), ("a", 4)]
    assert write_slice(target, 0, 0, ["id", "n"], batch) == len(batch)
    expected = [("a", 4, "x"), ("b", 3, "x"), (None, 7, "x"), (None, 8, "x")]
    assert _rows(postgres_dsn, table) == expected
    assert write_slice(target, 0, 0, ["id", "n"], [("a", 99)]) == 0  # a replay
    assert write_slice(target, 1, 0, ["id", "n"], [("b", 5)]) == 1
    assert write_slice(target, 1, 1, ["id", "n"], []) == 0  # an empty slice
    assert _rows(postgres_dsn, table) == [("a", 4, "x"), ("b", 5, "x"), *expected[2:]]


def test_appends_are_copied_and_a_dead_kept_connection_is_replaced(postgres_dsn: str) -> None:
    table = _table(postgres_dsn, "seq int NOT NULL, payload jsonb, at timestamptz")
    target = PostgresTarget(postgres_dsn, table, (), f"job-{table}", 1, query="q")
    columns = ["seq", "payload", "at"]
    first = [(n, '{"k": "v"}', "2026-01-01T00:00:00Z") for n in range(3)]
    assert write_slice(target, 0, 0, columns, first) == 3
    kept = _backend(postgres_dsn)
    assert write_slice(target, 1, 0, columns, [(3, None, None)]) == 1
    assert _backend(postgres_dsn) == kept, "the kept connection was not reused"

    with psycopg.connect(postgres_dsn, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (kept,))
    assert write_slice(target, 2, 0, columns, [(4, None, None)]) == 1
    assert _backend(postgres_dsn) != kept
    assert [r[0] for r in _rows(postgres_dsn, table)] == [0, 1, 2, 3, 4]
    assert write_slice(target, 2, 0, columns, [(4, None, None)]) == 0
