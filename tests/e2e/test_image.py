"""The image, built here and run with podman: every role starts as a named non-root
user, and a Spark driver started the way Spark on Kubernetes starts it (`driver …`)
copies a topic exactly once with the connector and the JVM sink writer the image ships
(no `spark.jars`), its checkpoint in S3 through the S3A filesystem the image ships. (A
checkpoint on a local path, a claim, is the real-node test's:
tests/e2e/test_real_node.py.)"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

from onceflow.eos.audit_reader import read_sequences
from onceflow.logic.audit import audit_sequences
from tests.support.kafka import new_topic
from tests.support.testbed import onceflow_image, podman, script_value

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


def _produce(bootstrap: str, topic: str, first: int = 1) -> None:
    """Committed records ``first..first+RECORDS-1`` of every stream, and an aborted
    transaction a read_committed reader skips."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": uuid.uuid4().hex})
    producer.init_transactions(30)
    producer.begin_transaction()
    for seq in range(first, first + RECORDS):
        for s in range(STREAMS):
            body = json.dumps({"stream": f"s{s}", "seq": seq}).encode()
            producer.produce(topic, body, f"s{s}".encode())
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, json.dumps({"stream": "poison", "seq": 1}).encode(), b"poison")
    producer.flush(30)
    producer.abort_transaction(30)


def _copy_settings(bootstrap: str, source: str, out: str, checkpoint: str) -> dict[str, object]:
    return {
        "job": "copy",
        "mode": "enabled",
        "bootstrapServers": bootstrap,
        "transactionalIdPrefix": f"image-{uuid.uuid4().hex[:6]}",
        "topics": [source],
        "transform": {"sql": "SELECT key, value FROM input"},
        "sink": {"kafka": {"topic": out, "partitions": 2}},
        "checkpointLocation": checkpoint,
        "trigger": {"availableNow": True},
    }


def _run_driver(
    image: str,
    settings: dict[str, object],
    config: Path,
    *,
    env: dict[str, str] | None = None,
    conf: dict[str, str] | None = None,
) -> None:
    """The driver as Spark on Kubernetes starts it (``driver`` + spark-submit's
    arguments), on the host's network so it reaches the test bed's loopback services."""
    config.mkdir(mode=0o755, exist_ok=True)
    config.parent.chmod(0o755)
    (config / "job.json").write_text(json.dumps(settings))
    (config / "job.json").chmod(0o644)
    environment = {"SPARK_DRIVER_BIND_ADDRESS": "127.0.0.1", **(env or {})}
    options = [f"--env={name}={value}" for name, value in environment.items()]
    spark_conf = [f"--conf={key}={value}" for key, value in (conf or {}).items()]
    driver = podman(
        "run",
        "--rm",
        "--network",
        "host",
        *options,
        "--volume",
        f"{config}:/etc/onceflow:ro",
        image,
        "driver",
        "--master",
        "local[2]",
        *spark_conf,
        "local:///opt/onceflow/spark-main.py",
        "--config",
        "/etc/onceflow/job.json",
        timeout_s=900,
    )
    assert driver.returncode == 0, driver.stdout[-8000:] + driver.stderr[-5000:]


def _audit(bootstrap: str, topic: str, records: int) -> None:
    pairs, unparsable = read_sequences(bootstrap, topic, key_field="stream", seq_field="seq")
    report = audit_sequences(pairs, expect=records, key_count=STREAMS, unparsable=unparsable)
    assert report.ok, report


def test_a_driver_keeps_its_checkpoint_in_s3_and_resumes_from_it_exactly_once(
    image: str, kafka_bootstrap: str, s3_endpoint: str, tmp_path: Path
) -> None:
    """s3a:// through the S3A filesystem and AWS SDK the image ships, credentials from
    the environment (what a SparkJob's ``env`` gives the pods from a Secret). The second
    run finds the first one's offsets in the bucket: had it not, it would copy the first
    records again and the audit would count them twice."""
    script_value("scripts/s3proxy.sh", "bucket", "onceflow-checkpoints")
    access_key, secret_key = script_value("scripts/s3proxy.sh", "credentials").split()
    prefix = f"copy-{uuid.uuid4().hex[:6]}"
    source = new_topic(kafka_bootstrap, "image-s3-in", partitions=2)
    out = f"image-s3-out-{uuid.uuid4().hex[:6]}"
    settings = _copy_settings(
        kafka_bootstrap, source, out, f"s3a://onceflow-checkpoints/{prefix}/checkpoint"
    )
    env = {"AWS_ACCESS_KEY_ID": access_key, "AWS_SECRET_ACCESS_KEY": secret_key}
    conf = {
        "spark.hadoop.fs.s3a.endpoint": s3_endpoint,
        "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
        "spark.hadoop.fs.s3a.path.style.access": "true",
    }
    _produce(kafka_bootstrap, source)
    _run_driver(image, settings, tmp_path / "config", env=env, conf=conf)
    keys = script_value("scripts/s3proxy.sh", "keys", "onceflow-checkpoints", prefix).split()
    assert f"{prefix}/checkpoint/offsets/0" in keys, f"no offset log in the bucket: {keys}"
    _produce(kafka_bootstrap, source, first=RECORDS + 1)
    _run_driver(image, settings, tmp_path / "config", env=env, conf=conf)
    _audit(kafka_bootstrap, out, 2 * RECORDS)
