"""The image, built here and run with podman: every role starts as a named non-root
user, and a Spark driver started the way Spark on Kubernetes starts it (`driver …`)
copies a topic exactly once with the connector the image ships (no `spark.jars`)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

from onceflow.eos.audit_reader import read_sequences
from onceflow.logic.audit import audit_sequences
from tests.support.kafka import new_topic
from tests.support.testbed import onceflow_image, podman

pytestmark = [pytest.mark.image, pytest.mark.kafka, pytest.mark.timeout(1800)]

STREAMS, RECORDS = 3, 500


@pytest.fixture(scope="module")
def image() -> str:
    return onceflow_image()


def test_every_role_runs_as_a_named_non_root_user(image: str) -> None:
    who = podman("run", "--rm", "--entrypoint", "id", image)
    assert who.stdout.strip() == "uid=65532(onceflow) gid=65532(onceflow) groups=65532(onceflow)"
    cli = podman("run", "--rm", image, "--help")
    assert cli.returncode == 0 and "operator" in cli.stdout, cli.stderr
    executor = podman("run", "--rm", image, "executor")
    assert executor.returncode != 0
    assert "SPARK_EXECUTOR_MEMORY: set by Spark" in executor.stderr, executor.stderr


def _produce(bootstrap: str, topic: str) -> None:
    """Committed records, and an aborted transaction a read_committed reader skips."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": uuid.uuid4().hex})
    producer.init_transactions(30)
    producer.begin_transaction()
    for seq in range(1, RECORDS + 1):
        for s in range(STREAMS):
            body = json.dumps({"stream": f"s{s}", "seq": seq}).encode()
            producer.produce(topic, body, f"s{s}".encode())
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, json.dumps({"stream": "poison", "seq": 1}).encode(), b"poison")
    producer.flush(30)
    producer.abort_transaction(30)


def test_a_spark_driver_in_the_image_copies_a_topic_exactly_once(
    image: str, kafka_bootstrap: str, tmp_path: Path
) -> None:
    source = new_topic(kafka_bootstrap, "image-in", partitions=2)
    out = f"image-out-{uuid.uuid4().hex[:6]}"
    _produce(kafka_bootstrap, source)
    settings = {
        "job": "copy",
        "mode": "enabled",
        "bootstrapServers": kafka_bootstrap,
        "transactionalIdPrefix": f"image-{uuid.uuid4().hex[:6]}",
        "topics": [source],
        "transform": {"sql": "SELECT key, value FROM input"},
        "sink": {"kafka": {"topic": out, "partitions": 2}},
        "checkpointLocation": "/tmp/checkpoint",
        "availableNow": True,
    }
    config = tmp_path / "config"
    config.mkdir(mode=0o755)
    tmp_path.chmod(0o755)
    (config / "job.json").write_text(json.dumps(settings))
    (config / "job.json").chmod(0o644)
    driver = podman(
        "run",
        "--rm",
        "--network",
        "host",
        "--env",
        "SPARK_DRIVER_BIND_ADDRESS=127.0.0.1",
        "--volume",
        f"{config}:/etc/onceflow:ro",
        image,
        "driver",
        "--master",
        "local[2]",
        "local:///opt/onceflow/spark-main.py",
        "--config",
        "/etc/onceflow/job.json",
        timeout_s=900,
    )
    assert driver.returncode == 0, driver.stderr[-5000:]
    pairs, unparsable = read_sequences(kafka_bootstrap, out, key_field="stream", seq_field="seq")
    report = audit_sequences(pairs, expect=RECORDS, key_count=STREAMS, unparsable=unparsable)
    assert report.ok, report
