"""The starting options of the driver's Kafka reader. They matter only to the first
driver on a checkpoint (Spark resumes from the checkpoint afterwards), which after an
input reset is the one that must start where the reset says (``logic.input_reset``)."""

from __future__ import annotations

from typing import Any

from onceflow.api.driver import SparkJobSettings
from onceflow.eos.consume import end_offsets
from onceflow.logic.starting_position import (
    Positions,
    batch_end_offsets,
    starting_offsets,
    unknown_partitions,
)
from onceflow.spark.hadoop_files import last_batch, read_text


class InputResetError(ValueError):
    """A reset's offsets name partitions the input does not have."""


def starting_options(
    spark: Any, settings: SparkJobSettings, continue_from_checkpoint: str | None = None
) -> dict[str, str]:
    """``continue_from_checkpoint``: where partitions an input reset does not name go
    on from (``spark.reset_checkpoint.QueryStart``)."""
    if settings.starting_timestamp is not None:
        # A partition with no record at or after the time starts at its end, rather than
        # failing the query (Spark's default): nothing is there to read yet.
        return {
            "startingTimestamp": str(settings.starting_timestamp),
            "startingOffsetsByTimestampStrategy": "latest",
        }
    given = settings.starting_partition_offsets
    checkpoint = settings.checkpoint_location.rstrip("/")
    if not given or last_batch(spark, f"{checkpoint}/offsets") >= 0:
        return {"startingOffsets": settings.starting_offsets}
    partitions = {
        topic: sorted(end_offsets(settings.bootstrap_servers, topic, settings.kafka_config))
        for topic in settings.topics
    }
    if wrong := unknown_partitions(partitions, given):
        raise InputResetError(
            "; ".join(wrong) + "; give the reset a new id with partitions the input has"
        )
    resumed = _last_finished(spark, settings, continue_from_checkpoint)
    return {
        "startingOffsets": starting_offsets(partitions, given, resumed, settings.starting_offsets)
    }


def _last_finished(spark: Any, settings: SparkJobSettings, before: str | None) -> Positions:
    """Where the stopped job's last finished batch ended, from its checkpoint's logs."""
    if before is None:
        return {}
    batch = last_batch(spark, f"{before.rstrip('/')}/commits")
    if batch < 0:
        return {}
    entry = f"{before.rstrip('/')}/offsets/{batch}"
    return batch_end_offsets(read_text(spark, entry), settings.topics, entry)
