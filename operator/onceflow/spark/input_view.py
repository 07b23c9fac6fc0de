"""View ``input``: what a SparkJob's transform reads.

Spark's Kafka source as it is -- ``key`` and ``value`` as bytes (Avro, Protobuf and
JSON alike), ``headers``, ``topic``, ``partition``, ``offset``, ``timestamp``,
``timestampType`` -- then the value's JSON fields as columns when the job gives a
schema, the watermark, and record-id dedup. Dedup comes before the transform so that
a duplicated input record never reaches an aggregation; its state lives in the
checkpoint with the offsets, so a replayed batch sees the ids exactly as the first
attempt did. Which copy of an id a batch keeps follows the shuffle's arrival order, so
the per-delivery columns are dropped after it: what is left is equal in every copy, and
a replay writes the same rows to the same places.
"""

from __future__ import annotations

from typing import Any

from onceflow.api.columns import DELIVERY_COLUMNS, KAFKA_COLUMNS
from onceflow.api.driver import SparkJobSettings

PARSED = "__onceflow_value"


def with_value_fields(frame: Any, schema: str) -> Any:
    """Kafka's columns and the value's JSON fields next to them."""
    from pyspark.sql import functions as sql

    parsed = sql.from_json(sql.col("value").cast("string"), schema).alias(PARSED)
    return frame.select(*KAFKA_COLUMNS, parsed).select(*KAFKA_COLUMNS, f"{PARSED}.*")


def input_view(frame: Any, settings: SparkJobSettings) -> Any:
    """The Kafka source's frame shaped as view ``input``."""
    frame = frame.select(*KAFKA_COLUMNS)
    if settings.value_schema:
        frame = with_value_fields(frame, settings.value_schema)
    if settings.watermark:
        frame = frame.withWatermark(settings.watermark.column, settings.watermark.spark_delay)
    if settings.dedup:
        frame = frame.dropDuplicatesWithinWatermark(settings.dedup.columns)
        frame = frame.drop(*DELIVERY_COLUMNS)
    return frame
