"""The postgres connector's CDC mode against the raw ceiling: pg_recvlogical reading
the same WAL through the same plugin (pgoutput) into /dev/null, side by side. Each
round's two slots are created before the changes are written, so both decode exactly
the same transactions; the connector also writes them to Kafka, transactionally with
their offsets.

Usage: make kafka-up postgres-up && .venv/bin/python benchmarks/postgres_cdc.py
Reported: changes/s of each and cdc / raw.
"""

from __future__ import annotations

import argparse
import glob
import subprocess
import time
import uuid

import psycopg
from _harness import run_task

from onceflow.api import ExactlyOnceMode
from onceflow.connectors.postgres import PostgresConnector

PER_TRANSACTION = 10


def recvlogical() -> str:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_recvlogical"))
    if not found:
        raise SystemExit("pg_recvlogical not found: make postgres-up installs the server")
    return found[-1]


def write_changes(dsn: str, table: str, slots: list[str], changes: int) -> str:
    """Creates ``slots`` first, then ``changes`` inserts; the WAL position after them."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY, payload text)")
        conn.execute(f"CREATE PUBLICATION {table} FOR TABLE {table}")
        for slot in slots:
            conn.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))
        payload = "x" * 100
        for first in range(0, changes, PER_TRANSACTION):
            with conn.transaction():
                conn.cursor().executemany(
                    f"INSERT INTO {table} VALUES (%s, %s)",
                    [(n, payload) for n in range(first, min(changes, first + PER_TRANSACTION))],
                )
        (end,) = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone() or ("",)
    return str(end)


def raw_rate(dsn: str, table: str, slot: str, end: str, changes: int) -> float:
    started = time.perf_counter()
    subprocess.run(
        [
            recvlogical(),
            "-d",
            dsn,
            "--slot",
            slot,
            "--start",
            "--no-loop",
            "-o",
            "proto_version=1",
            "-o",
            f"publication_names={table}",
            "-E",
            end,
            "-f",
            "/dev/null",
        ],
        check=True,
    )
    return changes / (time.perf_counter() - started)


def cdc_rate(bootstrap: str, dsn: str, table: str, slot: str, changes: int) -> float:
    config = {
        "url": dsn,
        "tables": [table],
        "slot": slot,
        "publication": table,
        "snapshot": "never",
        "batchSize": 1000,
    }
    return run_task(
        bootstrap, ExactlyOnceMode.ENABLED, PostgresConnector(), "postgres", config, changes
    ).rate


def drop(dsn: str, table: str, slots: list[str]) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for slot in slots:
            conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
        conn.execute(f"DROP PUBLICATION {table}")
        conn.execute(f"DROP TABLE {table}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--dsn", default="postgresql://onceflow@127.0.0.1:15432/postgres")
    parser.add_argument("--changes", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=2, help="interleaved runs of each")
    args = parser.parse_args()
    raw = cdc = 0.0
    for _ in range(args.rounds):  # interleaved: machine drift hits both alike
        table = f"bench_cdc_{uuid.uuid4().hex[:8]}"
        slots = [f"{table}_raw", f"{table}_cdc"]
        end = write_changes(args.dsn, table, slots, args.changes)
        try:
            raw = max(raw, raw_rate(args.dsn, table, slots[0], end, args.changes))
            cdc = max(cdc, cdc_rate(args.bootstrap, args.dsn, table, slots[1], args.changes))
        finally:
            drop(args.dsn, table, slots)
    print(f"{'changes':>8} {'raw/s':>9} {'cdc/s':>9} {'ratio':>6}")
    print(f"{args.changes:>8} {raw:>9.0f} {cdc:>9.0f} {cdc / raw:>6.2f}")


if __name__ == "__main__":
    main()
