"""Every built-in source connector through the source conformance kit (source_kit.py):
SIGKILLs, its source system's own faults and a restart under a new generation while
its source changes, then every change delivered once, in order, per its own truth.

Size comes from ONCEFLOW_CHAOS_KILLS (a quarter: faults per connector, default 5) and
ONCEFLOW_CHAOS_RECORDS; ``make conformance`` runs it large.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conformance.fixtures import FixtureLookup
from tests.conformance.source_kit import KitSize, SourceSubject, run_source_kit
from tests.conformance.source_subjects import (
    FilesSubject,
    KafkaMirrorSubject,
    PostgresCdcSubject,
    PostgresIncrementingSubject,
    SequenceSubject,
)

pytestmark = [pytest.mark.kafka]

BUILT_IN = [
    pytest.param(SequenceSubject, id=SequenceSubject.name),
    pytest.param(FilesSubject, id=FilesSubject.name),
    pytest.param(KafkaMirrorSubject, id=KafkaMirrorSubject.name),
    pytest.param(
        PostgresIncrementingSubject,
        id=PostgresIncrementingSubject.name,
        marks=[pytest.mark.postgres, pytest.mark.alone],
    ),
    pytest.param(
        PostgresCdcSubject,
        id=PostgresCdcSubject.name,
        marks=[pytest.mark.postgres, pytest.mark.alone],
    ),
]
"""The PostgreSQL subjects restart the server and end sessions by application name: they
run alone."""


@pytest.fixture
def subject(request: pytest.FixtureRequest) -> SourceSubject:
    """The parameter's subject, given only the session fixtures it asks for: a subject
    without PostgreSQL never starts it."""
    fixture: FixtureLookup = request.getfixturevalue
    subject: SourceSubject = request.param.from_fixtures(fixture)
    return subject


@pytest.mark.parametrize("subject", BUILT_IN, indirect=True)
def test_every_change_arrives_once_in_order_through_kills_source_faults_and_a_restart(
    subject: SourceSubject, kafka_bootstrap: str, tmp_path: Path
) -> None:
    report = run_source_kit(subject, kafka_bootstrap, tmp_path, KitSize.from_env())
    print(report.summary())
    assert not report.audit.problems, (report.summary(), report.audit.problems[:20])
    assert report.audit.caught_up, (report.summary(), report.audit.behind[:20])
