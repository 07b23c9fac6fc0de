"""Every exactly-once sink of Onceflow's Spark jobs (the Kafka sink through each of its
writers) through the sink conformance kit (sink_kit.py): a driver stopped between the
sink's commit and the checkpoint's, drivers SIGKILLed inside batches, a layout and
prefix change with a batch in flight, and a lost checkpoint; after each, exactly what
the committed input says, never an aborted record.

Size: ONCEFLOW_CHAOS_DRIVER_KILLS (default 3) kills per sink, the input growing with
it; a run takes that many driver lives plus four.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conformance.fixtures import FixtureLookup
from tests.conformance.sink_kit import SinkKitSize, SinkSubject, run_sink_kit
from tests.conformance.sink_subjects import (
    FileSinkSubject,
    KafkaPythonWriterSubject,
    KafkaSubject,
    PostgresAppendSubject,
    PostgresUpsertSubject,
)

SIZE = SinkKitSize.from_env()

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.timeout(SIZE.timeout_s)]

SINKS = [
    pytest.param(KafkaSubject, id=KafkaSubject.name),
    pytest.param(KafkaPythonWriterSubject, id=KafkaPythonWriterSubject.name),
    pytest.param(PostgresAppendSubject, id=PostgresAppendSubject.name, marks=pytest.mark.postgres),
    pytest.param(PostgresUpsertSubject, id=PostgresUpsertSubject.name, marks=pytest.mark.postgres),
    pytest.param(FileSinkSubject, id=FileSinkSubject.name),
]


@pytest.fixture
def subject(request: pytest.FixtureRequest) -> SinkSubject:
    """The parameter's subject, given only the session fixtures it asks for: a subject
    without PostgreSQL never starts it."""
    fixture: FixtureLookup = request.getfixturevalue
    subject: SinkSubject = request.param.from_fixtures(fixture, SIZE)
    return subject


@pytest.mark.parametrize("subject", SINKS, indirect=True)
def test_the_sink_writes_every_committed_record_exactly_once_through_every_fault(
    subject: SinkSubject, kafka_bootstrap: str, tmp_path: Path
) -> None:
    report = run_sink_kit(subject, kafka_bootstrap, tmp_path, SIZE)  # asserts each stage
    print(report.summary())
