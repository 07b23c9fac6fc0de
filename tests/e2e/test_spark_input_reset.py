"""A SparkJob's input reset under ``onceflow run``, with a real driver and broker: asked
of a running job it is refused and changes nothing; asked of a stopped one it moves
the named partition back, the other goes on where the job stopped, and records added
while stopped arrive once. The output then holds exactly the replay that was asked
for, and nothing else twice."""

from __future__ import annotations

import signal
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from onceflow.api.input_reset import InputReset
from onceflow.api.pipeline import WorkloadState
from onceflow.eos.consume import read_to_end
from onceflow.logic.input_reset import input_reset_outcome, with_input_reset
from onceflow.logic.starting_position import batch_end_offsets
from tests.support.copy_job import copy_job_settings
from tests.support.drivers import (
    die_between_sink_commit_and_checkpoint,
    driver_log,
    run_driver_until,
)
from tests.support.kafka import InputProducer, create_topic
from tests.support.onceflow_run import start_run
from tests.support.testbed import spark_jars
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

FIRST, MORE, REPLAY_FROM = 100, 20, 60


def _manifests(bootstrap: str, name: str, source: str, **job: Any) -> str:
    pipeline = {
        "apiVersion": "onceflow.io/v1alpha1",
        "kind": "Pipeline",
        "metadata": {"name": name},
        "spec": {"kafka": {"bootstrapServers": bootstrap}, "exactlyOnce": "enabled"},
    }
    copier = {
        "apiVersion": "onceflow.io/v1alpha1",
        "kind": "SparkJob",
        "metadata": {"name": "copier"},
        "spec": {
            "pipeline": name,
            "input": {"topics": [source]},
            "transform": {"sql": "SELECT key, value FROM input"},
            "sink": {"kafka": {"topic": f"{name}.copied", "partitions": 2}},
            "checkpoint": {"pvc": "unused-by-onceflow-run"},
            "trigger": {"processingTime": "1s"},
            **job,
        },
    }
    return yaml.safe_dump_all([pipeline, copier])


def _produce(producer: InputProducer, numbers: range) -> None:
    for partition in (0, 1):
        for number in numbers:
            producer.send(f"p{partition}-{number}".encode(), b"k", partition=partition)
    producer.finish()


def _copied(bootstrap: str, topic: str) -> Counter[str]:
    try:
        return Counter(m.value().decode() for m in read_to_end(bootstrap, topic, timeout_s=10))
    except LookupError:  # the sink creates its topic with its first batch
        return Counter()


def test_a_stopped_job_reset_to_an_offset_replays_that_partition_from_there_only(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    name = f"reset-{uuid.uuid4().hex[:6]}"
    source = create_topic(kafka_bootstrap, f"{name}.in", partitions=2)
    copied = f"{name}.copied"
    producer = InputProducer(kafka_bootstrap, source)  # one: it checks what it sent in all
    _produce(producer, range(FIRST))
    manifest, state, log = tmp_path / "pipeline.yaml", tmp_path / "state", tmp_path / "run.log"
    offsets = [{"topic": source, "partition": 0, "offset": REPLAY_FROM}]

    def reset(reset_id: str) -> dict[str, Any]:
        return {"id": reset_id, "offsets": offsets, "acknowledgeReplays": True}

    manifest.write_text(_manifests(kafka_bootstrap, name, source))
    jars = str(Path(spark_jars()[0]).parent)
    run = start_run(manifest, state, log, ONCEFLOW_SPARK_JARS=jars)
    try:
        wait_for(lambda: sum(_copied(kafka_bootstrap, copied).values()) == 2 * FIRST, 240, "all")

        manifest.write_text(
            _manifests(kafka_bootstrap, name, source, inputReset=reset("too-early"))
        )
        wait_for(lambda: "input reset too-early Refused" in log.read_text(), 60, "refused")

        manifest.write_text(_manifests(kafka_bootstrap, name, source, state="stopped"))
        wait_for(lambda: "copier: stopped; the checkpoint is kept" in log.read_text(), 60, "held")
        _produce(producer, range(FIRST, FIRST + MORE))
        manifest.write_text(
            _manifests(kafka_bootstrap, name, source, state="stopped", inputReset=reset("back"))
        )
        wait_for(lambda: "input reset back Applied" in log.read_text(), 60, "applied")
        manifest.write_text(_manifests(kafka_bootstrap, name, source, inputReset=reset("back")))

        total = 2 * (FIRST + MORE) + (FIRST - REPLAY_FROM)
        wait_for(lambda: sum(_copied(kafka_bootstrap, copied).values()) >= total, 240, "replay")
    finally:
        run.send_signal(signal.SIGINT)
        assert run.wait(60) == 0
    counts = _copied(kafka_bootstrap, copied)
    expected = Counter(f"p{p}-{n}" for p in (0, 1) for n in range(FIRST + MORE))
    expected.update(f"p0-{n}" for n in range(REPLAY_FROM, FIRST))
    assert counts == expected, {k: v for k, v in (counts - expected).items()} or (expected - counts)
    text = log.read_text()
    assert text.count("input reset back Applied") == 1, "applied once, though asked twice"
    checkpoint = state / "default.copier.checkpoint"
    assert (checkpoint / "resets" / "1-back" / "offsets").is_dir(), "the new checkpoint"
    assert (checkpoint / "commits").is_dir(), "the old one is kept"


def test_a_reset_finishes_the_batch_the_stopped_query_left_half_written_and_is_never_undone(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """A driver that died between its sink commit and Spark's commit log leaves a
    batch in the output the checkpoint does not record. Resetting partition 0 to its
    start must not write that batch's partition 1 records again (the old query finishes
    it first), and a driver later told the job's own checkpoint (its status lost) must
    not go back to it: it follows the reset."""
    name = f"reset-{uuid.uuid4().hex[:6]}"
    source = create_topic(kafka_bootstrap, f"{name}.in", partitions=2)
    copied = f"{name}.copied"
    producer = InputProducer(kafka_bootstrap, source)
    _produce(producer, range(FIRST))
    sink = {"kafka": {"topic": copied, "partitions": 2}}
    settings = copy_job_settings(kafka_bootstrap, source, tmp_path, sink, maxOffsetsPerTrigger=60)
    in_flight = die_between_sink_commit_and_checkpoint(settings, tmp_path)
    checkpoint = Path(settings.checkpoint_location)
    entry = checkpoint / "offsets" / str(in_flight)
    batch_end = batch_end_offsets(entry.read_text(), [source], str(entry))[source]
    assert 0 < batch_end[0] + batch_end[1] < 2 * FIRST, "the half-written batch is a part"

    applied = input_reset_outcome(
        InputReset.model_validate({"id": "p0", "acknowledgeReplays": True,
                                   "offsets": [{"topic": source, "partition": 0, "offset": 0}]}),
        None, WorkloadState.STOPPED, True, settings.sink, [source],
    )  # fmt: skip
    reset = with_input_reset(settings, applied)
    expected = Counter(f"p{p}-{n}" for p in (0, 1) for n in range(FIRST))
    expected.update(f"p0-{n}" for n in range(batch_end[0]))  # the replay asked for
    run_driver_until(
        reset, tmp_path, lambda: _copied(kafka_bootstrap, copied) == expected, 240, "the replay"
    )
    assert (checkpoint / "commits" / str(in_flight)).exists(), "the old query finished it"

    # Its status lost, the job is told its own checkpoint again: it runs on the reset's.
    _produce(producer, range(FIRST, FIRST + MORE))
    expected.update(f"p{p}-{n}" for p in (0, 1) for n in range(FIRST, FIRST + MORE))
    run_driver_until(
        settings, tmp_path, lambda: _copied(kafka_bootstrap, copied) == expected, 240, "new ones"
    )
    # The whole log: a driver stopped mid-call can add kilobytes of stack traces after it.
    said = (tmp_path / "driver.log").read_text()
    assert "was reset to 1-p0 since" in said, driver_log(tmp_path)
