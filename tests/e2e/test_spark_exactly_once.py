"""Spark jobs with Onceflow's exactly-once Kafka sink: what the input's isolation level
lets through, and a sink task that fails mid-partition. The sinks' driver faults (a
stop between the sink's commit and the checkpoint's, kills, layout and prefix changes
with a batch in flight, a lost checkpoint) are the sink conformance kit's:
tests/conformance/test_sink_kit.py.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from onceflow.eos.audit_reader import read_sequences
from onceflow.logic.audit import audit_sequences
from tests.support.copy_job import (
    PER_TRANSACTION,
    POISON,
    RECORDS,
    STREAMS,
    copy_job_settings,
    produce_input,
)
from tests.support.drivers import driver_log, start_driver
from tests.support.kafka import new_topic

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def test_read_uncommitted_lets_aborted_records_through(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Why the operator sets the isolation level: the same job in `disabled` mode reads
    uncommitted and copies records of aborted transactions."""
    source = new_topic(kafka_bootstrap, "spark-iso-in", partitions=1)
    produce_input(kafka_bootstrap, source)
    out = f"spark-iso-out-{uuid.uuid4().hex[:6]}"
    settings = copy_job_settings(
        kafka_bootstrap,
        source,
        tmp_path,
        {"kafka": {"topic": out, "partitions": 3}},
        mode="disabled",
        trigger={"availableNow": True},
        maxOffsetsPerTrigger=None,
    )
    assert settings.isolation_level == "read_uncommitted"
    assert start_driver(settings, tmp_path).wait(300) == 0
    pairs, _ = read_sequences(kafka_bootstrap, out, key_field="stream", seq_field="seq")
    assert sum(1 for key, _ in pairs if key == POISON) == RECORDS // PER_TRANSACTION


def test_a_sink_task_failing_mid_partition_is_retried_without_duplicates(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    source = new_topic(kafka_bootstrap, "spark-fail-in", partitions=3)
    produce_input(kafka_bootstrap, source)
    out = f"spark-fail-out-{uuid.uuid4().hex[:6]}"
    flag = tmp_path / "failed-once"
    settings = copy_job_settings(
        kafka_bootstrap,
        source,
        tmp_path,
        {"kafka": {"topic": out, "partitions": 3}},
        trigger={"availableNow": True},
        chaosFailSinkOnce=str(flag),
    )
    assert start_driver(settings, tmp_path).wait(300) == 0, driver_log(tmp_path)
    assert flag.exists(), "the injected failure never fired"
    # Raised in the JVM writer, the default: the Python writer's drill says the same
    # inside a PythonException, so this also proves which writer wrote the batch.
    failure = "io.onceflow.spark.kafka.ChaosDrill$InjectedFailure: chaos drill: failing partition"
    assert failure in (tmp_path / "driver.log").read_text()
    pairs, unparsable = read_sequences(kafka_bootstrap, out, key_field="stream", seq_field="seq")
    report = audit_sequences(pairs, expect=RECORDS, key_count=STREAMS, unparsable=unparsable)
    assert report.ok, report
