"""What one Spark driver is told: the contract between whoever plans a SparkJob's
driver (the operator or ``onceflow run``) and the ``onceflow spark-job`` process, as
``api.task``'s TaskSettings is a source task's.

It travels as JSON (the job's ConfigMap on Kubernetes, a file standalone) and is
validated on both ends. Kept apart from the SparkJob resource (``api.spark``): the
resource is what users write, this is what Onceflow derives from it for one driver,
and only the driver and the code that plans it need to know this shape.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from onceflow.api.base import ApiModel
from onceflow.api.input_reset import InputOffset
from onceflow.api.pipeline import ExactlyOnceMode
from onceflow.api.spark import (
    DEFAULT_KAFKA_SINK_WRITER,
    Dedup,
    KafkaSinkWriter,
    OutputMode,
    Sink,
    Transform,
    Trigger,
    Watermark,
)


class DriverDrills(ApiModel):
    """Test drills: faults a test injects into a driver to prove it recovers. Never
    set by the operator or by ``onceflow run`` (absent from every settings they write);
    only tests set them, in a settings file or with ``model_copy``. They stay fields of
    the settings (flat, ``chaos*`` on the wire) so a test's driver is started exactly
    as a real one, from one settings file."""

    chaos_fail_sink_once: str | None = Field(
        default=None,
        description="Fault injection for drills: the first sink task to find no file at "
        "this path creates it and fails half-way through its partition.",
    )
    chaos_exit_after_sink_commit: str | None = Field(
        default=None,
        description="Fault injection for drills: the first driver to finish a sink commit "
        "with no file at this path writes the batch id there and exits at once, before "
        "Spark's commit log records the batch.",
    )


class SparkJobSettings(DriverDrills):
    """What one driver is told (the job's ConfigMap, or a file when run locally): the
    SparkJob spec resolved against its Pipeline, with the mode the rollout is in."""

    job: str = Field(description="Name of the SparkJob.")
    namespace: str = Field(default="default", description="Namespace of the SparkJob.")
    mode: ExactlyOnceMode = Field(description="Pipeline mode the job is built for.")
    bootstrap_servers: str = Field(description="Kafka bootstrap servers.")
    kafka_config: dict[str, str] = Field(default_factory=dict, description="librdkafka extras.")
    kafka_config_dir: str | None = Field(
        default=None,
        description="Mounted Secret with more librdkafka settings, one per file (the "
        "Pipeline's kafka.authSecretRef); translated for Spark's Java Kafka client.",
    )
    kafka_secret: str | None = Field(
        default=None, description="Name of the Secret mounted at kafkaConfigDir."
    )
    transactional_id_prefix: str = Field(description="Prefix of the sink transactional ids.")
    previous_transactional_id_prefix: str | None = Field(
        default=None,
        description="The sink's prefix before a rename: a batch left in flight under it "
        "is finished under its ids, never written again under the new ones.",
    )
    topics: list[str] = Field(min_length=1, description="Resolved input topics.")
    starting_offsets: Literal["earliest", "latest"] = "earliest"
    starting_timestamp: int | None = Field(
        default=None, ge=0, description="An input reset's time: wins over startingOffsets."
    )
    starting_partition_offsets: list[InputOffset] | None = Field(
        default=None,
        description="An input reset's offsets: other partitions go on from the last "
        "finished batch of the checkpoint before the reset (or startingOffsets without one).",
    )
    max_offsets_per_trigger: int | None = Field(default=None, ge=1)
    value_schema: str | None = Field(default=None, description="input.valueSchema.")
    watermark: Watermark | None = None
    dedup: Dedup | None = None
    transform: Transform
    transform_dir: str | None = Field(
        default=None,
        description="Directory holding transform.configMap's files (its mount).",
    )
    transform_code_digest: str | None = Field(
        default=None,
        description="Digest of transform.configMap's files: an edit of the code is an "
        "edit of the settings, so the driver restarts and it and its executors run one "
        "version of the code.",
    )
    output_mode: OutputMode = OutputMode.APPEND
    sink: Sink
    kafka_sink_writer: KafkaSinkWriter = Field(
        default=DEFAULT_KAFKA_SINK_WRITER,
        description="What writes an exactly-once Kafka sink's batches on the executors: "
        "jvm (Onceflow's Spark data source; its jar must be on the classpath) or python "
        "(mapInArrow and confluent-kafka, the fallback). Same ids, markers and replay "
        "rules: a batch one committed is skipped by the other.",
    )
    checkpoint_location: str = Field(description="Checkpoint directory or URI.")
    postgres_dsn_file: str | None = Field(
        default=None, description="File holding the sink's libpq DSN (a mounted Secret key)."
    )
    trigger: Trigger = Field(default_factory=Trigger)
    metrics_port: int = Field(
        default=0, ge=0, le=65535, description="Port of the driver's /metrics; 0: none."
    )

    @property
    def isolation_level(self) -> str:
        """read_committed from `preparing` on: consumers first, producers after."""
        return "read_committed" if self.mode.reads_committed else "read_uncommitted"
