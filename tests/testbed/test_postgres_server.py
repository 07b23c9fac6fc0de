"""The PostgreSQL server is real: transactions commit and roll back."""

from __future__ import annotations

import uuid

import psycopg
import pytest

pytestmark = pytest.mark.postgres


def test_rolled_back_row_is_gone_and_committed_row_stays(postgres_dsn: str) -> None:
    table = f"smoke_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (id int primary key)")
    with psycopg.connect(postgres_dsn) as conn:
        conn.execute(f"INSERT INTO {table} VALUES (1)")
        conn.commit()
        conn.execute(f"INSERT INTO {table} VALUES (2)")
        conn.rollback()
    with psycopg.connect(postgres_dsn) as conn:
        rows = conn.execute(f"SELECT id FROM {table} ORDER BY id").fetchall()
    assert rows == [(1,)]
