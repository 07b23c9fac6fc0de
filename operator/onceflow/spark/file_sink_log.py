"""Spark's file sink keeps its own log of the batches it committed (``_spark_metadata``
in the output directory) and skips every batch whose id that log already holds: that
is how a replayed batch is not written twice. A query started from a new checkpoint
(a lost volume, a deleted directory) over an output an earlier query wrote numbers its
batches from 0 again, and the sink would skip each of them up to the old query's last
as already written, silently dropping their records. A checkpoint that planned fewer
batches than the output's log holds is not the one that wrote them, so the driver
refuses to start instead, naming the way out."""

from __future__ import annotations

from typing import Any

from onceflow.spark.hadoop_files import last_batch

SINK_LOG = "_spark_metadata"


class FileSinkResetError(ValueError):
    """The checkpoint is newer than the output it would write to."""


def refuse_output_of_another_query(spark: Any, checkpoint: str, output: str) -> None:
    """Raises ``FileSinkResetError`` when ``output``'s log holds a batch ``checkpoint``
    never planned. A checkpoint always plans a batch before the sink commits it, so a
    driver that died between the two still passes."""
    written = last_batch(spark, f"{output.rstrip('/')}/{SINK_LOG}")
    planned = last_batch(spark, f"{checkpoint.rstrip('/')}/offsets")
    if written > planned:
        raise FileSinkResetError(
            f"spec.sink.files.path: {output} holds batches 0-{written} of an earlier query "
            f"(its {SINK_LOG} log), but the checkpoint at {checkpoint} planned "
            + ("none" if planned < 0 else f"only up to batch {planned}")
            + ": the checkpoint was lost or reset, and Spark's file sink would skip this "
            f"query's batches 0-{written} as already written, losing their records. Write "
            "to a new directory (spec.sink.files.path), or restore the checkpoint"
        )
