"""``onceflow run``'s side of the sink handover, against the real broker: a renamed
prefix fences the old sink ids before the driver's settings are written, and the
driver is told the old prefix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import KafkaException

from onceflow.api.driver import SparkJobSettings
from onceflow.model.spark_names import sink_transactional_id
from onceflow.standalone.spark_jobs import PlannedSparkJob, SparkJobSupervisor
from tests.support.kafka import zombie_in_a_transaction

pytestmark = pytest.mark.kafka


def _settings(bootstrap: str, prefix: str, tmp_path: Path) -> SparkJobSettings:
    return SparkJobSettings.model_validate(
        {
            "job": "agg",
            "mode": "enabled",
            "bootstrapServers": bootstrap,
            "transactionalIdPrefix": prefix,
            "topics": ["in"],
            "transform": {"sql": "SELECT key, value FROM input"},
            "sink": {"kafka": {"topic": "out", "partitions": 2}},
            "checkpointLocation": str(tmp_path / "checkpoint"),
        }
    )


def test_a_renamed_prefix_is_fenced_and_handed_to_the_driver(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    old_prefix = f"run-{tmp_path.name}"
    said: list[str] = []
    supervisor = SparkJobSupervisor(
        PlannedSparkJob(_settings(kafka_bootstrap, f"{old_prefix}-v2", tmp_path)),
        tmp_path,
        said.append,
    )
    supervisor.sink_file.parent.mkdir(parents=True, exist_ok=True)
    supervisor.sink_file.write_text(json.dumps({"partitions": 2, "prefix": old_prefix}))
    zombie = zombie_in_a_transaction(
        kafka_bootstrap, sink_transactional_id(old_prefix, "agg", 1), "out"
    )

    settings = supervisor._settings_to_start(now=0.0)

    assert settings is not None
    assert settings.previous_transactional_id_prefix == old_prefix
    with pytest.raises(KafkaException):
        zombie.commit_transaction(30)
    assert json.loads(supervisor.sink_file.read_text()) == {
        "partitions": 2,
        "prefix": f"{old_prefix}-v2",
        "previousPrefix": old_prefix,
    }
    assert any("prefix" in line and "fenced" in line for line in said), said
