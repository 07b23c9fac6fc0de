"""The fault campaign's small run (``make campaign`` runs the large one): real
pipelines on the three-broker cluster (a source of every connector kind: sequence,
files, a Kafka mirror, PostgreSQL incrementing and CDC; Spark jobs through the
exactly-once Kafka and Postgres sinks and Spark's file sink) struck by
one fault of every kind the machine allows, in a random order. Each fault is asserted
to have landed where it was aimed (a broker killed while it led a partition with a
transaction open, a task stopped until its coordinator rolled its transaction back, a
driver killed inside a batch, the supervisor killed mid-rollout...), and every output
to be exact: every record once and in order through the source and the Kafka sink, read
alike by librdkafka and Kafka's Java client, each row once in the Postgres sink's
table and the file sink's committed files, the CDC topic following the table change by
change to its final state, and each other source's topic passing its conformance
kit's audit against its source system."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.campaign.campaign import run_campaign
from tests.campaign.kinds import FaultKind
from tests.campaign.rig import CampaignSize
from tests.support.kafka_cluster import KafkaCluster

PIPELINES = (
    "counter", "changes", "files", "kafka", "postgres-incrementing", "copier", "rows", "archive",
)  # fmt: skip

pytestmark = [
    pytest.mark.kafka_cluster,
    pytest.mark.postgres,
    pytest.mark.spark,
    pytest.mark.alone,  # it kills shared brokers and crashes the shared database server
]

SMALL = CampaignSize(streams=4, per_stream=30_000, batch=10, poll_ms=100, kit_records=2000)
"""About 200 records a second while the faults last (every kind once: about four
minutes), then the rest as fast as the source goes."""


@pytest.mark.timeout(1500)
def test_one_fault_of_every_kind_lands_and_every_output_stays_exact(
    kafka_cluster: KafkaCluster, postgres_dsn: str, tmp_path: Path
) -> None:
    result = run_campaign(
        kafka_cluster, postgres_dsn, tmp_path / "rig", tmp_path / "report", SMALL,
        faults=None, seed=int(os.environ.get("ONCEFLOW_CAMPAIGN_SEED", "30")),
    )  # fmt: skip
    assert result.stalled is None, result.stalled
    struck = {s.kind for s in result.strikes}
    assert struck == set(result.kinds), f"never struck: {set(result.kinds) - struck}"
    if os.geteuid() == 0:
        assert {FaultKind.PARTITION, FaultKind.LOSSY_LINK} <= struck
    missed = [f"{s.kind.value}: {s.evidence}" for s in result.missed]
    assert not missed, "faults that missed prove nothing:\n" + "\n".join(missed)
    wrong = [f"{v.pipeline}: {v.detail}" for v in result.verdicts if not v.ok]
    assert not wrong, "\n".join(wrong)
    assert {v.pipeline for v in result.verdicts} == set(PIPELINES)
    assert (result.folder / "timeline.png").stat().st_size > 10_000
