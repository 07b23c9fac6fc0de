"""The SparkJob resource: a PySpark Structured Streaming job reading pipeline topics
``read_committed`` and writing through an exactly-once sink (DESIGN 3.4)."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Literal, Self

from pydantic import ConfigDict, Field, JsonValue, model_validator

from onceflow.api.base import ApiModel, LocalObjectReference, ObjectMeta
from onceflow.api.pipeline import ExactlyOnceMode
from onceflow.api.status import CommonStatus

# Tens of seconds of work for the exactly-once sink at its measured rates: far inside
# the default 60 s transaction timeout, large enough that batches stay efficient.
DEFAULT_MAX_OFFSETS_PER_TRIGGER = 100_000


def _one_of(*fields: str) -> JsonValue:
    """The CEL twin of ``_exactly_one`` so the API server enforces it without us."""
    present = ", ".join(f"has(self.{f})" for f in fields)
    return {
        "rule": f"[{present}].filter(x, x).size() == 1",
        "message": f"set exactly one of {' or '.join(fields)}",
    }


def _rules(*rules: JsonValue) -> ConfigDict:
    return ConfigDict(json_schema_extra={"x-kubernetes-validations": list(rules)})


def _one_of_rule(*fields: str) -> ConfigDict:
    return _rules(_one_of(*fields))


def _exactly_one(owner: str, **fields: object) -> None:
    given = [name for name, value in fields.items() if value is not None]
    if len(given) != 1:
        choices = " or ".join(fields)
        raise ValueError(f"{owner}: set exactly one of {choices} (got {given or 'none'})")


class KafkaInput(ApiModel):
    """Topics to read, named directly or through the pipeline's KafkaSources."""

    model_config = _one_of_rule("topics", "sources")

    topics: list[str] | None = Field(default=None, min_length=1, description="Topic names.")
    sources: list[str] | None = Field(
        default=None, min_length=1, description="KafkaSource names; their spec.topic is read."
    )
    starting_offsets: Literal["earliest", "latest"] = Field(
        default="earliest", description="Where a job without a checkpoint starts."
    )
    max_offsets_per_trigger: int | None = Field(
        default=DEFAULT_MAX_OFFSETS_PER_TRIGGER,
        ge=1,
        description="Upper bound on records per micro-batch (default "
        f"{DEFAULT_MAX_OFFSETS_PER_TRIGGER}). Each batch is one transaction per output "
        "partition: an unbounded first batch over a large topic could outlast the sink's "
        "transaction timeout and be aborted on every retry.",
    )

    @model_validator(mode="after")
    def _one_way_to_name_topics(self) -> Self:
        _exactly_one("input", topics=self.topics, sources=self.sources)
        return self


class Transform(ApiModel):
    """What the job computes: SQL over the view ``input``, or a Python function."""

    model_config = _one_of_rule("sql", "module")

    sql: str | None = Field(default=None, min_length=1, description="SQL over view `input`.")
    module: str | None = Field(
        default=None, min_length=1, description="Python module holding the transform."
    )
    function: str = Field(
        default="transform", description="Function (DataFrame) -> DataFrame in `module`."
    )

    @model_validator(mode="after")
    def _one_transform(self) -> Self:
        _exactly_one("transform", sql=self.sql, module=self.module)
        return self


class KafkaDelivery(StrEnum):
    EXACTLY_ONCE = "exactlyOnce"
    AT_LEAST_ONCE = "atLeastOnce"


class KafkaSink(ApiModel):
    topic: str = Field(min_length=1, max_length=249, description="Output topic.")
    partitions: int = Field(
        ge=1,
        le=10000,
        description="Fixed output partition count; deterministic partitioning needs it.",
    )
    transaction_timeout_ms: int = Field(
        default=60000,
        ge=1000,
        le=900000,
        description="transaction.timeout.ms of the sink producers: one batch's writes to "
        "one output partition must commit within it. At most the broker's "
        "transaction.max.timeout.ms.",
    )
    delivery: KafkaDelivery = Field(
        default=KafkaDelivery.EXACTLY_ONCE,
        description="exactlyOnce: Onceflow's transactional sink; atLeastOnce: Spark's "
        "built-in sink (rejected while the pipeline is enabled).",
    )


class PostgresSink(ApiModel):
    table: str = Field(min_length=1, description="Target table (schema.table).")
    key: list[str] = Field(
        default_factory=list, description="Upsert key columns; empty means append."
    )
    secret_ref: LocalObjectReference = Field(
        description="Secret with a `dsn` key (libpq connection string)."
    )
    parallelism: int = Field(
        default=4,
        ge=1,
        le=256,
        description="Concurrent writer transactions per batch; rows are split by a stable "
        "hash so a replayed batch splits the same way.",
    )


class FilesSink(ApiModel):
    path: str = Field(min_length=1, description="Output directory (local, s3a://, ...).")
    format: Literal["parquet", "json", "csv"] = Field(default="parquet", description="Format.")


class Sink(ApiModel):
    """Exactly one sink."""

    model_config = _one_of_rule("kafka", "postgres", "files")

    kafka: KafkaSink | None = Field(
        default=None, description="Transactional Kafka sink (or Spark's, at-least-once)."
    )
    postgres: PostgresSink | None = Field(
        default=None, description="Rows and batch marker in one database transaction."
    )
    files: FilesSink | None = Field(
        default=None, description="Spark's file sink with its metadata log."
    )

    @model_validator(mode="after")
    def _one_sink(self) -> Self:
        _exactly_one("sink", kafka=self.kafka, postgres=self.postgres, files=self.files)
        return self


class Checkpoint(ApiModel):
    model_config = _one_of_rule("path", "pvc")

    path: str | None = Field(default=None, min_length=1, description="Checkpoint URI.")
    pvc: str | None = Field(
        default=None, min_length=1, description="PersistentVolumeClaim mounted as checkpoint."
    )

    @model_validator(mode="after")
    def _one_location(self) -> Self:
        _exactly_one("checkpoint", path=self.path, pvc=self.pvc)
        return self


class Trigger(ApiModel):
    processing_time: str = Field(
        default="1s", pattern=r"^[0-9]+(ms|s|m)$", description="Micro-batch interval."
    )

    @property
    def spark_interval(self) -> str:
        """Spark's spelling: '200ms' -> '200 milliseconds', '1s' -> '1 seconds'."""
        unit = "ms" if self.processing_time.endswith("ms") else self.processing_time[-1]
        amount = self.processing_time.removesuffix(unit)
        return f"{amount} {dict(ms='milliseconds', s='seconds', m='minutes')[unit]}"


class SecretKeySelector(ApiModel):
    name: str = Field(
        max_length=253,
        pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
        description="Secret in the job's namespace.",
    )
    key: str = Field(max_length=253, pattern=r"^[-._a-zA-Z0-9]+$", description="Key in it.")


class EnvVarSource(ApiModel):
    secret_key_ref: SecretKeySelector = Field(description="A key of a Secret.")


# Set by Onceflow or by Spark on its pods; a user's value would silently lose or win.
RESERVED_ENV = (
    r"^(SPARK_.*|PYSPARK_.*|HADOOP_CONF_DIR|HADOOP_TOKEN_FILE_LOCATION|PATH|POD_NAME|POD_IP)$"
)
RESERVED_ENV_MESSAGE = (
    "SPARK_*, PYSPARK_*, HADOOP_CONF_DIR, HADOOP_TOKEN_FILE_LOCATION, PATH, POD_NAME and "
    "POD_IP are set by the image, Spark and Onceflow; pass Spark settings through sparkConf"
)
# Spark's own ways to set a pod's environment: beside an env entry of the same name, a
# pod would list it twice and the plain-text value from sparkConf could win.
SPARK_ENV_KEYS = (
    "spark.executorEnv.",
    "spark.kubernetes.driverEnv.",
    "spark.kubernetes.driver.secretKeyRef.",
    "spark.kubernetes.executor.secretKeyRef.",
)


class EnvVar(ApiModel):
    """An environment variable of the driver and every executor, from a literal value or
    a key of a Secret: how credentials that Spark's filesystems read from the
    environment (S3A's AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY) stay in a Secret
    instead of sparkConf, which every reader of the SparkJob sees."""

    model_config = _rules(
        _one_of("value", "valueFrom"),
        {"rule": f"!self.name.matches('{RESERVED_ENV}')", "message": RESERVED_ENV_MESSAGE},
    )

    name: str = Field(
        max_length=253, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", description="Variable name."
    )
    value: str | None = Field(default=None, description="A literal value.")
    value_from: EnvVarSource | None = Field(default=None, description="A Secret's key.")

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        _exactly_one(f"env[{self.name}]", value=self.value, valueFrom=self.value_from)
        if re.match(RESERVED_ENV, self.name):
            raise ValueError(f"env[{self.name}]: {RESERVED_ENV_MESSAGE}")
        return self

    def manifest(self) -> dict[str, JsonValue]:
        """The Kubernetes ``EnvVar`` for a container."""
        if self.value_from is None:
            return {"name": self.name, "value": self.value}
        ref = self.value_from.secret_key_ref
        secret: JsonValue = {"name": ref.name, "key": ref.key}
        return {"name": self.name, "valueFrom": {"secretKeyRef": secret}}


class Submitter(StrEnum):
    SPARK_OPERATOR = "spark-operator"
    SPARK_SUBMIT = "spark-submit"


class DriverSpec(ApiModel):
    cores: int = Field(default=1, ge=1, description="Driver cores.")
    memory: str = Field(default="1g", pattern=r"^[0-9]+[kmgt]?$", description="Driver memory.")


class ExecutorSpec(ApiModel):
    instances: int = Field(default=1, ge=1, description="Executor count.")
    cores: int = Field(default=1, ge=1, description="Cores per executor.")
    memory: str = Field(default="1g", pattern=r"^[0-9]+[kmgt]?$", description="Executor memory.")


# Spark's keys for CPU requests below a core; Onceflow sizes the spark-submit driver
# pod from the first, Spark the executor pods from the second.
CPU_REQUEST_KEYS = (
    "spark.kubernetes.driver.request.cores",
    "spark.kubernetes.executor.request.cores",
)
CPU_QUANTITY = re.compile(r"^([0-9]+(\.[0-9]+)?|[0-9]+m)$")


def _cpu_requests_rule() -> ConfigDict:
    """The CEL twin of ``_cpu_requests_are_quantities``: a pod create that would fail
    with 422 on every retry is refused when the SparkJob is written instead."""
    rules: list[JsonValue] = [
        {
            "rule": f"!has(self.sparkConf) || !('{key}' in self.sparkConf) || "
            f"isQuantity(self.sparkConf['{key}'])",
            "message": f"sparkConf['{key}'] must be a CPU quantity (e.g. 250m, 1, 1.5)",
        }
        for key in CPU_REQUEST_KEYS
    ]
    return _rules(*rules)


class SparkJobSpec(ApiModel):
    """Desired state of a streaming job."""

    model_config = _cpu_requests_rule()

    pipeline: str = Field(min_length=1, description="Name of the Pipeline this job belongs to.")
    input: KafkaInput = Field(description="What the job reads.")
    transform: Transform = Field(description="What the job computes.")
    sink: Sink = Field(description="Where results go, exactly once.")
    checkpoint: Checkpoint = Field(description="Where the offset log and state live.")
    trigger: Trigger = Field(default_factory=Trigger, description="Micro-batch trigger.")
    submitter: Submitter = Field(
        default=Submitter.SPARK_OPERATOR,
        description="spark-operator renders a SparkApplication; spark-submit a Job.",
    )
    image: str | None = Field(default=None, description="Driver/executor image.")
    driver: DriverSpec = Field(default_factory=DriverSpec, description="Driver resources.")
    executor: ExecutorSpec = Field(default_factory=ExecutorSpec, description="Executors.")
    spark_conf: dict[str, str] = Field(
        default_factory=dict, description="Extra Spark settings (isolation is set for you)."
    )
    env: list[EnvVar] = Field(
        default_factory=list,
        max_length=100,  # bounds the cost of its CEL rules, as the API server requires
        description="Environment of the driver and every executor (e.g. S3 credentials).",
        # The API server's twin of _env_names_are_unique (a list keyed by name).
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )

    @model_validator(mode="after")
    def _cpu_requests_are_quantities(self) -> Self:
        for key in CPU_REQUEST_KEYS:
            value = self.spark_conf.get(key)
            if value is not None and not CPU_QUANTITY.match(value):
                raise ValueError(
                    f"sparkConf[{key!r}] = {value!r} is not a CPU quantity (e.g. 250m, 1, 1.5)"
                )
        return self

    @model_validator(mode="after")
    def _env_names_are_unique(self) -> Self:
        names = [variable.name for variable in self.env]
        if twice := sorted({name for name in names if names.count(name) > 1}):
            raise ValueError(f"env: {', '.join(twice)} set more than once; keep one entry each")
        both = sorted(
            key
            for key in self.spark_conf
            for prefix in SPARK_ENV_KEYS
            if key.startswith(prefix) and key.removeprefix(prefix) in names
        )
        if both:
            raise ValueError(
                f"sparkConf[{both[0]!r}] sets a variable env sets too; keep it in env only"
            )
        return self

    @property
    def env_manifest(self) -> list[dict[str, JsonValue]]:
        """``env`` as the containers' ``env`` list."""
        return [variable.manifest() for variable in self.env]


class SparkJobStatus(CommonStatus):
    """Observed state of the job's Spark application, written only by the operator."""

    observed_mode: ExactlyOnceMode | None = Field(
        default=None, description="Exactly-once mode the running application was built for."
    )
    application_state: str | None = Field(default=None, description="Spark application state.")
    sink_partitions: int | None = Field(
        default=None, ge=1, description="Sink partition count whose ids are in use."
    )
    sink_transactional_id_prefix: str | None = Field(
        default=None, description="Prefix of the sink transactional ids in use."
    )
    previous_sink_transactional_id_prefix: str | None = Field(
        default=None, description="The sink's prefix before its last rename."
    )


class SparkJob(ApiModel):
    """A streaming job of a pipeline."""

    api_version: Literal["onceflow.io/v1alpha1"] = "onceflow.io/v1alpha1"
    kind: Literal["SparkJob"] = "SparkJob"
    metadata: ObjectMeta
    spec: SparkJobSpec
    status: SparkJobStatus | None = None


class SparkJobSettings(ApiModel):
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
    max_offsets_per_trigger: int | None = Field(default=None, ge=1)
    transform: Transform
    sink: Sink
    checkpoint_location: str = Field(description="Checkpoint directory or URI.")
    postgres_dsn_file: str | None = Field(
        default=None, description="File holding the sink's libpq DSN (a mounted Secret key)."
    )
    trigger: Trigger = Field(default_factory=Trigger)
    available_now: bool = Field(
        default=False, description="Process what is there, then stop (tests, backfills)."
    )
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

    @property
    def isolation_level(self) -> str:
        """read_committed from `preparing` on: consumers first, producers after."""
        return "read_committed" if self.mode.reads_committed else "read_uncommitted"
