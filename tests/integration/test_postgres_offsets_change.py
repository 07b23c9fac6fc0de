"""A CDC source's offset set while it is stopped, checked against its replication slot
on a real server (issue 29, item 2): PostgreSQL decodes a logical slot from its
``confirmed_flush_lsn`` whatever earlier position is asked, so an lsn before it is a
rewind that cannot be honoured; one past the server's current WAL position names
transactions not written yet; without the slot nothing can resume. Everything from
the confirmed position to the current one is taken.

The slot is made and moved with SQL (the test bed's user is the superuser): created,
some WAL written, advanced to the server's position (its ``confirmed_flush_lsn`` moves
there), more WAL written, so creation < confirmed < current, which the test checks
before it asks anything.
"""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest

from onceflow.connectors.postgres import PostgresConnector
from onceflow.connectors.postgres.pgoutput import lsn_text, parse_lsn

pytestmark = [pytest.mark.postgres]


def _one(conn: psycopg.Connection[Any], query: str, *params: object) -> str:
    found = conn.execute(query, params).fetchone()
    assert found is not None and found[0] is not None, query
    return str(found[0])


def _write_wal(conn: psycopg.Connection[Any], table: str) -> None:
    conn.execute(
        f"INSERT INTO {table} (payload) SELECT md5(g::text) FROM generate_series(1, 200) g"
    )


def test_an_lsn_is_taken_from_the_slots_confirmed_position_to_the_servers_current_one(
    postgres_dsn: str,
) -> None:
    suffix = uuid.uuid4().hex[:8]
    table = slot = f"moved_{suffix}"
    config = {"url": postgres_dsn, "tables": [table], "slot": slot, "snapshot": "never"}
    connector = PostgresConnector()
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (id bigserial PRIMARY KEY, payload text)")
        try:
            created = _one(
                conn,
                "SELECT lsn::text FROM pg_create_logical_replication_slot(%s, 'pgoutput')",
                slot,
            )
            _write_wal(conn, table)
            conn.execute("SELECT pg_replication_slot_advance(%s, pg_current_wal_lsn())", (slot,))
            _write_wal(conn, table)
            confirmed = _one(
                conn,
                "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s",
                slot,
            )
            current = _one(conn, "SELECT pg_current_wal_lsn()::text")
            system = _one(conn, "SELECT system_identifier::text FROM pg_control_system()")
            assert parse_lsn(created) < parse_lsn(confirmed) < parse_lsn(current), (
                created,
                confirmed,
                current,
            )

            partition = {"system": system, "slot": slot}
            between = lsn_text((parse_lsn(confirmed) + parse_lsn(current)) // 2)
            beyond = lsn_text(parse_lsn(current) + 2**40)  # whatever other tests write
            asked = [created, confirmed, None, between, current, beyond]
            entries = [
                (partition, lsn and connector.alter_offset(config, partition, {"lsn": lsn}))
                for lsn in asked
            ]
            refused = connector.check_offsets(config, {}, entries)

            assert sorted(refused) == [0, 5], refused
            behind = f"lsn {created}: before slot {slot}'s confirmed_flush_lsn {confirmed}"
            assert behind in refused[0]
            assert "cannot be honoured" in refused[0] and "a new slot name" in refused[0]
            assert f"lsn {beyond}: beyond the server's current WAL position" in refused[5]

            # A partition of another database system: stored where no task would read it.
            elsewhere = {"system": str(int(system) + 1), "slot": slot}
            entry = (elsewhere, connector.alter_offset(config, elsewhere, {"lsn": between}))
            foreign = connector.check_offsets(config, {}, [entry])
            assert f"partition system {int(system) + 1} is not this database" in foreign[0]
        finally:
            conn.execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
                " WHERE slot_name = %s",
                (slot,),
            )
            conn.execute(f"DROP TABLE IF EXISTS {table}")


def test_an_lsn_for_a_slot_that_does_not_exist_is_refused(postgres_dsn: str) -> None:
    """The slot's absence is said first, whatever system the partition names."""
    slot = f"gone_{uuid.uuid4().hex[:8]}"
    config = {"url": postgres_dsn, "tables": ["public.gone"], "slot": slot}
    connector = PostgresConnector()
    partition = {"system": "1", "slot": slot}
    entries = [(partition, connector.alter_offset(config, partition, {"lsn": "0/1"}))]
    refused = connector.check_offsets(config, {}, entries)
    assert list(refused) == [0], refused
    assert f"slot {slot} (config.slot) does not exist" in refused[0]
