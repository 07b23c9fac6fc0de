"""A table for the ``postgres`` connector's ``incrementing`` mode: rows numbered by a
``bigserial`` id, written by concurrent sessions (``writer`` says which), and the ids
the connector's records carry."""

from __future__ import annotations

import json
import uuid
from typing import Any

import psycopg

from onceflow.eos.consume import read_to_end


def create_writer_table(dsn: str) -> str:
    """A fresh table; its name."""
    table = f"q_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (id bigserial PRIMARY KEY, writer int, note text)")
    return table


def incrementing_config(dsn: str, table: str, column: str = "id") -> dict[str, Any]:
    """The connector config reading ``table`` in ``column`` order, polling often."""
    return {
        "mode": "incrementing",
        "url": dsn,
        "tables": [table],
        "incrementingColumn": column,
        "pollIntervalMs": 50,
        "batchSize": 200,
    }


def delivered_ids(bootstrap: str, topic: str) -> list[int]:
    """The ``id`` of every committed record, in log order; none before a task has
    created the topic."""
    try:
        return [
            json.loads(m.value() or b"null")["id"]
            for m in read_to_end(bootstrap, topic, isolation="read_committed")
        ]
    except LookupError:
        return []


def table_ids(dsn: str, table: str) -> list[int]:
    """The ids the table holds, ascending."""
    with psycopg.connect(dsn) as conn:
        return [i for (i,) in conn.execute(f"SELECT id FROM {table} ORDER BY id")]
