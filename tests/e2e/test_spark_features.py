"""What Spark users write in a SparkJob, run by real drivers through kills: record-id
dedup over an at-least-once input (with headers and a transform module from a
ConfigMap's files), the orders example's windowed counts upserted into Postgres, and
the errors a driver gives for a transform that cannot run."""

from __future__ import annotations

import json
import random
import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from confluent_kafka import Consumer

from onceflow.api.driver import SparkJobSettings
from onceflow.api.pipeline import ExactlyOnceMode
from onceflow.api.spark import SparkJob, Trigger
from tests.support.drivers import (
    die_between_sink_commit_and_checkpoint,
    driver_log,
    kill_drivers,
    start_driver,
)
from tests.support.kafka import InputProducer, new_topic
from tests.support.testbed import ROOT

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

DRAIN = Trigger(available_now=True)
EVENTS = 4000
EVENT_SPACING = timedelta(milliseconds=50)  # 200 s of event time in all
START = datetime(2026, 1, 1, tzinfo=UTC)
DEDUP_DELAY_S = 10

# A transform with a UDF, as a ConfigMap would hold it: the executors' Python workers
# can only unpickle `tag` if the driver shipped the module to them.
SHAPE_MODULE = """
from pyspark.sql import functions as F

@F.udf("string")
def tag(event_id):
    return f"seen:{event_id}"

def transform(frame):
    body = F.to_json(F.struct("id", F.col("n"), tag("id").alias("tag")))
    return frame.select("key", body.alias("value"), "headers")
"""


def _produce_with_redeliveries(bootstrap: str, topic: str, seed: int) -> tuple[int, int]:
    """Events e0..e{EVENTS-1} in event-time order, about 15 % of them delivered again a
    few dozen records later (as a retrying producer or an upstream replay does), with
    the same payload and headers. Returns (records written, duplicates among them)."""
    rng = random.Random(seed)
    producer = InputProducer(bootstrap, topic)
    redeliver: dict[int, list[tuple[bytes, bytes]]] = {}

    def send(key: bytes, body: bytes) -> None:
        producer.send(body, key, headers=[("origin", b"test"), ("id", key)])

    duplicates = 0
    for index in range(EVENTS):
        stamp = (START + index * EVENT_SPACING).isoformat(timespec="milliseconds")
        event = {"id": f"e{index}", "ts": stamp.replace("+00:00", "Z"), "n": index}
        record = (f"e{index}".encode(), json.dumps(event).encode())
        send(*record)
        for again in redeliver.pop(index, []):
            send(*again)
            duplicates += 1
        if rng.random() < 0.15:
            redeliver.setdefault(index + rng.randint(5, 60), []).append(record)
    for late in redeliver.values():
        for again in late:
            send(*again)
            duplicates += 1
    written = producer.finish()
    return written, duplicates


def _read_committed(bootstrap: str, topic: str) -> list[Any]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": uuid.uuid4().hex,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    consumer.subscribe([topic])
    messages, ended = [], set()
    try:
        while True:
            message = consumer.poll(5)
            if message is None:
                break
            if message.error():
                ended.add(message.partition())
                continue
            messages.append(message)
    finally:
        consumer.close()
    return messages


def _progress(workdir: Path) -> list[dict[str, Any]]:
    lines = (workdir / "driver.log").read_text().splitlines()
    marker = "onceflow progress "
    return [json.loads(line.split(marker, 1)[1]) for line in lines if marker in line]


def test_dedup_writes_each_record_id_once_through_kills_with_bounded_state(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    source = new_topic(kafka_bootstrap, "dedup-in", partitions=3)
    out = f"dedup-out-{uuid.uuid4().hex[:6]}"
    written, duplicates = _produce_with_redeliveries(kafka_bootstrap, source, seed=3)
    assert duplicates >= EVENTS // 10, f"only {duplicates} duplicates in {written} records"
    modules = tmp_path / "configmap"
    modules.mkdir()
    (modules / "shape_events.py").write_text(SHAPE_MODULE)
    settings = SparkJobSettings.model_validate(
        {
            "job": f"dedup-{uuid.uuid4().hex[:6]}",
            "mode": "enabled",
            "bootstrapServers": kafka_bootstrap,
            "transactionalIdPrefix": "dedup",
            "topics": [source],
            "maxOffsetsPerTrigger": 400,
            "valueSchema": "id STRING, ts TIMESTAMP, n INT",
            "watermark": {"column": "ts", "delay": f"{DEDUP_DELAY_S}s"},
            "dedup": {"columns": ["id"]},
            "transform": {"module": "shape_events", "configMap": "shapes"},
            "transformDir": str(modules),
            "sink": {"kafka": {"topic": out, "partitions": 3}},
            "checkpointLocation": str(tmp_path / "checkpoint"),
            "trigger": {"processingTime": "500ms"},
        }
    )
    die_between_sink_commit_and_checkpoint(settings, tmp_path)
    kill_drivers(settings, tmp_path, kills=1, seed=11)
    final = start_driver(settings.model_copy(update={"trigger": DRAIN}), tmp_path)
    assert final.wait(300) == 0, driver_log(tmp_path)

    messages = _read_committed(kafka_bootstrap, out)
    ids = Counter(json.loads(m.value())["id"] for m in messages)
    twice = {event_id: n for event_id, n in ids.items() if n > 1}
    assert not twice, f"{len(twice)} ids written more than once, e.g. {list(twice)[:5]}"
    missing = {f"e{i}" for i in range(EVENTS)} - set(ids)
    assert not missing, _why_missing(missing, tmp_path)
    first = messages[0]
    assert json.loads(first.value())["tag"] == f"seen:{first.key().decode()}", "UDF ran"
    assert ("origin", b"test") in (first.headers() or []), "headers reach the output"

    progress = _progress(tmp_path)
    state = [p["stateRows"] for p in progress if "stateRows" in p]
    watermarks = [p["watermark"] for p in progress if p.get("watermark")]
    print(
        f"dedup: {written} records, {duplicates} duplicates, {len(ids)} ids written; "
        f"state rows per batch max {max(state)}, last {state[-1]}; last watermark "
        f"{watermarks[-1]}"
    )
    assert max(state) < EVENTS // 4, f"state not bounded by the watermark: {state}"
    assert watermarks[-1] > (START + timedelta(seconds=150)).isoformat()[:19], watermarks[-1]


def _why_missing(missing: set[str], workdir: Path) -> str:
    """What a reader of a failed run needs: which ids, the batches' offset ranges and
    watermarks, and how many rows each batch dropped as late."""
    checkpoint = workdir / "checkpoint" / "offsets"
    planned = sorted((int(f.name), f.read_text().splitlines()) for f in checkpoint.glob("[0-9]*"))
    batches = "\n".join(f"  batch {n}: {lines[-1]} {lines[1][:40]}" for n, lines in planned)
    dropped = [(p["batchId"], p.get("rowsDroppedByWatermark")) for p in _progress(workdir)]
    lowest = sorted(missing, key=lambda event_id: int(event_id[1:]))[:20]
    return (
        f"{len(missing)} ids missing, e.g. {lowest}\noffset log:\n{batches}\n"
        f"rows dropped as late per batch: {dropped}\n{driver_log(workdir)}"
    )


def _orders_job() -> SparkJob:
    documents = yaml.safe_load_all((ROOT / "examples" / "orders-pipeline.yaml").read_text())
    (job,) = [d for d in documents if d and d["kind"] == "SparkJob"]
    return SparkJob.model_validate(job)


def test_the_orders_example_upserts_windowed_counts_exactly_through_kills(
    kafka_bootstrap: str, postgres_dsn: str, tmp_path: Path
) -> None:
    job = _orders_job().spec
    assert job.sink.postgres is not None and job.watermark is not None
    source = new_topic(kafka_bootstrap, "orders-in", partitions=3)
    producer = InputProducer(kafka_bootstrap, source)
    expected: Counter[tuple[str, int]] = Counter()
    # Recent record times: the broker deletes segments whose records are older than its
    # retention (7 days), which would take the input away under the driver.
    base_ms = (int(time.time() * 1000) - 3_600_000) // 10_000 * 10_000
    for seq in range(1500):
        for stream in ("s0", "s1", "s2", "s3"):
            stamp = base_ms + seq * 80  # 120 s of event time
            body = json.dumps({"stream": stream, "seq": seq}).encode()
            producer.send(body, stream.encode(), timestamp=stamp)
            expected[(stream, stamp // 10_000 * 10)] += 1
    producer.finish()
    table = f"orders_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(
            f"CREATE TABLE {table} (stream text, window_start timestamptz, orders bigint, "
            "PRIMARY KEY (stream, window_start))"
        )
    dsn_file = tmp_path / "dsn"
    dsn_file.write_text(postgres_dsn)
    sink = job.sink.model_copy(
        update={"postgres": job.sink.postgres.model_copy(update={"table": table})}
    )
    settings = SparkJobSettings(
        job=f"orders-{uuid.uuid4().hex[:6]}",
        mode=ExactlyOnceMode.ENABLED,
        bootstrap_servers=kafka_bootstrap,
        transactional_id_prefix="orders",
        topics=[source],
        max_offsets_per_trigger=500,
        value_schema=job.input.value_schema,
        watermark=job.watermark,
        transform=job.transform,
        output_mode=job.output_mode,
        sink=sink,
        checkpoint_location=str(tmp_path / "checkpoint"),
        postgres_dsn_file=str(dsn_file),
        trigger=Trigger(processing_time="500ms"),
    )
    die_between_sink_commit_and_checkpoint(settings, tmp_path)
    kill_drivers(settings, tmp_path, kills=1, seed=5)
    final = start_driver(settings.model_copy(update={"trigger": DRAIN}), tmp_path)
    assert final.wait(300) == 0, driver_log(tmp_path)

    with psycopg.connect(postgres_dsn) as conn:
        rows = conn.execute(
            f"SELECT stream, extract(epoch FROM window_start)::bigint, orders FROM {table}"
        ).fetchall()
    found = {(stream, start): orders for stream, start, orders in rows}
    assert found == dict(expected), {
        k: (found.get(k), expected.get(k))
        for k in set(found) | set(expected)
        if found.get(k) != expected.get(k)
    }


def test_a_transform_that_cannot_run_stops_the_driver_naming_the_field(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    source = new_topic(kafka_bootstrap, "bad-transform-in", partitions=1)
    modules = tmp_path / "configmap"
    modules.mkdir()
    (modules / "helpers.py").write_text("X = 1\n")
    base = {
        "job": "bad",
        "mode": "enabled",
        "bootstrapServers": kafka_bootstrap,
        "transactionalIdPrefix": "bad",
        "topics": [source],
        "sink": {"kafka": {"topic": f"bad-out-{uuid.uuid4().hex[:6]}", "partitions": 1}},
        "trigger": {"availableNow": True},
    }
    cases = {
        "spec.transform.module: no module 'shape_events' in configMap 'shapes' "
        "(files: helpers.py)": {
            "transform": {"module": "shape_events", "configMap": "shapes"},
            "transformDir": str(modules),
        },
        "spec.transform: the output has column(s) 'topic', 'offset' that spec.sink.kafka "
        "would drop": {"transform": {"sql": "SELECT value, topic, offset FROM input"}},
        "spec.transform: the output's column 'headers' is array<string>": {
            "transform": {"sql": "SELECT value, array('x') AS headers FROM input"}
        },
    }
    for index, (message, case) in enumerate(cases.items()):
        wire = {**base, **case, "checkpointLocation": str(tmp_path / f"checkpoint-{index}")}
        driver = start_driver(SparkJobSettings.model_validate(wire), tmp_path)
        assert driver.wait(300) != 0
        assert message in driver_log(tmp_path), driver_log(tmp_path)
