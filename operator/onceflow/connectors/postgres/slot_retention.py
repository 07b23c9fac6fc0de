"""How much WAL a CDC source's replication slot keeps on the database, and when that
is too much: a slot holds WAL from the last position the source confirmed, so a task
that is behind, crash-looping or stopped makes the database keep every change since,
and its disk fills. The task exports the figure as a gauge; the operator asks on its
passes and reports the source Degraded above the limit, before the disk is full or
the server's own ``max_slot_wal_keep_size`` invalidates the slot (which loses the
changes for good)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psycopg

from onceflow.api.connector import Retention
from onceflow.connectors.postgres.answer_deadline import answering_within
from onceflow.connectors.postgres.settings import DEFAULTS, connect

KEEP_SIZE_SHARE = 0.8
"""Of the server's ``max_slot_wal_keep_size``: the warning must come before the
server invalidates the slot."""


def retained_bytes(conn: psycopg.Connection[Any], slot: str) -> int | None:
    """WAL between the server's current position and the slot's restart position;
    None when the slot does not exist (yet)."""
    return slot_wal(conn, slot)[0]


def slot_wal(conn: psycopg.Connection[Any], slot: str) -> tuple[int | None, int]:
    """(``retained_bytes``, the server's current WAL position), in one query."""
    found = conn.execute(
        "SELECT (SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint"
        " FROM pg_replication_slots WHERE slot_name = %s),"
        " pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint",
        (slot,),
    ).fetchone()
    assert found is not None, "a SELECT without FROM returns its row"
    retained, current = found
    return (None if retained is None else int(retained)), int(current)


def keep_size_bytes(conn: psycopg.Connection[Any]) -> int | None:
    """The server's ``max_slot_wal_keep_size`` in bytes; None when unlimited (-1)."""
    found = conn.execute(
        "SELECT setting::bigint FROM pg_settings WHERE name = 'max_slot_wal_keep_size'"
    ).fetchone()
    if found is None or int(found[0]) < 0:
        return None
    return int(found[0]) * 1024 * 1024  # the setting's unit is MB


def judge(slot: str, retained: int, configured: int, keep_size: int | None) -> Retention:
    """The limit is the configured one, or less when the server would drop the slot
    earlier."""
    limit, limit_from = configured, f"config.maxRetainedWalBytes ({configured} bytes)"
    if keep_size is not None and KEEP_SIZE_SHARE * keep_size < configured:
        limit = int(KEEP_SIZE_SHARE * keep_size)
        limit_from = (
            f"{KEEP_SIZE_SHARE:.0%} of the server's max_slot_wal_keep_size ({keep_size} "
            "bytes), beyond which PostgreSQL invalidates the slot and its changes are lost"
        )
    return Retention(
        what=f"WAL kept by replication slot {slot}",
        bytes=retained,
        limit_bytes=limit,
        limit_from=limit_from,
    )


def slot_retention(config: Mapping[str, Any], secrets: Mapping[str, str]) -> Retention | None:
    """Asked by the operator; None when the slot is not there yet."""
    merged = {**DEFAULTS, **config}
    slot = str(merged["slot"])
    with (
        connect(merged["url"], secrets, f"onceflow-{slot}-observer") as conn,
        answering_within(conn, "the retention query"),
    ):
        retained = retained_bytes(conn, slot)
        if retained is None:
            return None
        return judge(slot, retained, int(merged["maxRetainedWalBytes"]), keep_size_bytes(conn))
