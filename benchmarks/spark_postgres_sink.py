"""Onceflow's exactly-once Postgres sink vs. a plain ``foreachBatch`` COPY append (the
at-least-once sink a Spark user writes by hand), on the same input in the same run.

Usage: make kafka-up spark-jars && DSN=$(bash scripts/postgres.sh up) &&
       .venv/bin/python benchmarks/spark_postgres_sink.py --dsn "$DSN"
Target: exactly-once / plain >= 0.90.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import psycopg
from spark_sink import _fill, _topic

from onceflow.api.driver import SparkJobSettings
from onceflow.spark.job import apply_transform, read_input, start_query, stream_writer
from onceflow.spark.session import local_session

SQL = (
    "SELECT CAST(key AS STRING) AS stream, "
    "CAST(get_json_object(CAST(value AS STRING), '$.seq') AS BIGINT) AS seq FROM input"
)
SLICES = 4


def _table(dsn: str) -> str:
    name = f"bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {name} (stream text NOT NULL, seq bigint NOT NULL)")
    return name


def _settings(bootstrap: str, source: str, dsn: str, batch: int) -> SparkJobSettings:
    dsn_file = Path(tempfile.mkdtemp(prefix="onceflow-bench-")) / "dsn"
    dsn_file.write_text(dsn)
    return SparkJobSettings.model_validate(
        {
            "job": f"bench-{uuid.uuid4().hex[:6]}",
            "mode": "enabled",
            "bootstrapServers": bootstrap,
            "transactionalIdPrefix": "bench",
            "topics": [source],
            "transform": {"sql": SQL},
            "sink": {
                "postgres": {
                    "table": _table(dsn),
                    "secretRef": {"name": "unused"},
                    "parallelism": SLICES,
                }
            },
            "postgresDsnFile": str(dsn_file),
            "checkpointLocation": tempfile.mkdtemp(prefix="onceflow-bench-"),
            "trigger": {"availableNow": True},
            "maxOffsetsPerTrigger": batch,
        }
    )


def _plain_query(spark: Any, settings: SparkJobSettings, dsn: str) -> Any:
    """What a Spark user writes without Onceflow: each partition COPYs its rows."""
    table = settings.sink.postgres.table  # type: ignore[union-attr]

    def copy_rows(rows: Iterable[Any]) -> None:
        with (
            psycopg.connect(dsn) as conn,
            conn.cursor() as cursor,
            cursor.copy(f"COPY {table} (stream, seq) FROM STDIN") as copy,
        ):
            for row in rows:
                copy.write_row(tuple(row))

    def write(frame: Any, _batch_id: int) -> None:
        frame.repartition(SLICES).foreachPartition(copy_rows)

    output = apply_transform(spark, read_input(spark, settings), settings)
    return stream_writer(output, settings).foreachBatch(write).start()


def rate(spark: Any, bootstrap: str, source: str, dsn: str, args: Any, plain: bool) -> float:
    settings = _settings(bootstrap, source, dsn, args.batch)
    started = time.perf_counter()
    query = _plain_query(spark, settings, dsn) if plain else start_query(spark, settings)
    query.awaitTermination()
    elapsed = time.perf_counter() - started
    with psycopg.connect(dsn) as conn:
        table = settings.sink.postgres.table  # type: ignore[union-attr]
        found = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
    assert found is not None and found[0] == args.records, (found, args.records)
    records: int = args.records
    return records / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=50_000, help="maxOffsetsPerTrigger")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    spark = local_session("onceflow-bench")
    source = _topic(args.bootstrap, "bench-pg-in", 4)
    _fill(args.bootstrap, source, args.records)
    best = {True: 0.0, False: 0.0}
    for round_ in range(args.rounds + 1):  # round 0 warms up both paths
        for plain in (True, False):
            measured = rate(spark, args.bootstrap, source, args.dsn, args, plain)
            if round_:
                best[plain] = max(best[plain], measured)
    print(
        f"{args.records} records in batches of {args.batch}, {SLICES} slices, best of "
        f"{args.rounds}: plain foreachBatch COPY {best[True]:,.0f}/s, exactly-once sink "
        f"{best[False]:,.0f}/s, ratio {best[False] / best[True]:.2f} (target >= 0.90)"
    )


if __name__ == "__main__":
    main()
