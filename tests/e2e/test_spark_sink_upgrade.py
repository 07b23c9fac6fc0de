"""A job switches Kafka sink writers at a driver restart with a batch in flight: the
writer it was upgraded to (Python -> JVM), or rolled back to (JVM -> Python), replays
that batch, finds it committed by the other writer and writes nothing of it again.

Each driver runs as its pod would (``onceflow spark-job``); the first exits right after
the sink's commit of a batch, before Spark's commit log records it
(``die_between_sink_commit_and_checkpoint``), the second drains the input."""

from __future__ import annotations

from pathlib import Path

import pytest

from onceflow.api.spark import KafkaSinkWriter
from onceflow.eos.audit_reader import read_sequences
from onceflow.logic.audit import audit_sequences
from tests.conformance.sink_subjects import KafkaSubject
from tests.support.checkpoint import planned_ends
from tests.support.copy_job import RECORDS, STREAMS, produce_input
from tests.support.drivers import die_between_sink_commit_and_checkpoint, drain
from tests.support.kafka import new_topic

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


@pytest.mark.parametrize(
    ("before", "after"),
    [
        pytest.param("python", "jvm", id="upgrade-python-to-jvm"),
        pytest.param("jvm", "python", id="rollback-jvm-to-python"),
    ],
)
def test_the_batch_in_flight_at_a_writer_switch_is_written_once(
    before: KafkaSinkWriter, after: KafkaSinkWriter, kafka_bootstrap: str, tmp_path: Path
) -> None:
    source = new_topic(kafka_bootstrap, f"sink-upgrade-{before}", partitions=3)
    committed = produce_input(kafka_bootstrap, source)
    subject = KafkaSubject()
    job = subject.settings(kafka_bootstrap, source, tmp_path)
    settings = job.model_copy(update={"kafka_sink_writer": before})

    stopped = die_between_sink_commit_and_checkpoint(settings, tmp_path)
    checkpoint = Path(settings.checkpoint_location)
    held = subject.audit(committed.through(planned_ends(checkpoint, stopped)))
    assert held.ok, f"the {before} writer must have committed batches 0-{stopped}: {held}"

    drain(settings.model_copy(update={"kafka_sink_writer": after}), tmp_path)
    assert settings.sink.kafka is not None
    pairs, unparsable = read_sequences(
        kafka_bootstrap, settings.sink.kafka.topic, key_field="stream", seq_field="seq"
    )
    report = audit_sequences(pairs, expect=RECORDS, key_count=STREAMS, unparsable=unparsable)
    assert report.ok, f"batch {stopped} replayed by the {after} writer: {report}"
