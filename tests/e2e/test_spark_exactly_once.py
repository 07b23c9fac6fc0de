"""Spark jobs with Onceflow's exactly-once Kafka sink: driver kills, isolation.

Size: ONCEFLOW_CHAOS_DRIVER_KILLS (default 10, real kills in CI too).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

from onceflow.api.spark import SparkJobSettings
from onceflow.eos.audit_reader import read_sequences
from onceflow.logic.audit import audit_sequences
from tests.support.kafka import new_topic
from tests.support.testbed import ROOT, spark_jars

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

KILLS = int(os.environ.get("ONCEFLOW_CHAOS_DRIVER_KILLS", "10"))
STREAMS, RECORDS = 4, 1500


def _produce_input(bootstrap: str, topic: str) -> None:
    """Committed sequences, interleaved with aborted transactions of poison records."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": uuid.uuid4().hex})
    producer.init_transactions(30)
    for start in range(1, RECORDS + 1, 100):
        producer.begin_transaction()
        for seq in range(start, min(start + 100, RECORDS + 1)):
            for s in range(STREAMS):
                body = json.dumps({"stream": f"s{s}", "seq": seq}).encode()
                producer.produce(topic, body, f"s{s}".encode())
        producer.commit_transaction(30)
        producer.begin_transaction()
        producer.produce(topic, json.dumps({"stream": "poison", "seq": start}).encode(), b"poison")
        producer.flush(30)
        producer.abort_transaction(30)


def _settings(
    bootstrap: str, source: str, out: str, checkpoint: Path, **extra: object
) -> SparkJobSettings:
    return SparkJobSettings.model_validate(
        {
            "job": f"copy-{uuid.uuid4().hex[:6]}",
            "mode": "enabled",
            "bootstrapServers": bootstrap,
            "transactionalIdPrefix": "test",
            "topics": [source],
            "maxOffsetsPerTrigger": 500,
            "transform": {"sql": "SELECT key, value FROM input"},
            "sink": {"kafka": {"topic": out, "partitions": 3}},
            "checkpointLocation": str(checkpoint),
            "trigger": {"processingTime": "200ms"},
            **extra,
        }
    )


def _driver(settings: SparkJobSettings, workdir: Path) -> subprocess.Popen[bytes]:
    config = workdir / f"job-{uuid.uuid4().hex[:6]}.json"
    config.write_text(json.dumps(settings.to_wire()))
    with (workdir / "driver.log").open("ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "onceflow", "spark-job", "--config", str(config)],
            stdout=log,
            stderr=log,
            cwd=ROOT,
            env={
                **os.environ,
                "PYTHONPATH": str(ROOT),
                "ONCEFLOW_SPARK_JARS": str(Path(spark_jars()[0]).parent),
            },
        )


def test_killed_drivers_replay_batches_without_duplicates_or_loss(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    source = new_topic(kafka_bootstrap, "spark-in", partitions=3)
    out = f"spark-out-{uuid.uuid4().hex[:6]}"
    _produce_input(kafka_bootstrap, source)
    settings = _settings(kafka_bootstrap, source, out, tmp_path / "checkpoint")
    rng = random.Random(42)
    for _ in range(KILLS):
        driver = _driver(settings, tmp_path)
        time.sleep(rng.uniform(6.0, 14.0))  # fault timing (start-up is ~5 s), not sync
        driver.send_signal(signal.SIGKILL)
        driver.wait(30)
    final = _driver(settings.model_copy(update={"available_now": True}), tmp_path)
    assert final.wait(300) == 0, (tmp_path / "driver.log").read_text()[-3000:]

    pairs, unparsable = read_sequences(kafka_bootstrap, out, key_field="stream", seq_field="seq")
    report = audit_sequences(
        pairs,
        expect=RECORDS,
        expected_keys=[f"s{i}" for i in range(STREAMS)],
        unparsable=unparsable,
    )
    assert report.ok, report
    assert "poison" not in {key for key, _ in pairs}, "an aborted record reached the output"
