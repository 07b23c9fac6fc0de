"""The SparkJob resource: a PySpark Structured Streaming job reading pipeline topics
``read_committed`` and writing through an exactly-once sink (DESIGN 3.4)."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, ClassVar, Literal, Self

from pydantic import ConfigDict, Field, JsonValue, model_validator

from onceflow.api.base import ApiModel, LocalObjectReference, ObjectMeta
from onceflow.api.columns import (
    DELIVERY_COLUMNS,
    KAFKA_COLUMNS,
    column_type,
    is_event_time,
    schema_fields,
)
from onceflow.api.input_reset import InputReset, InputResetStatus
from onceflow.api.kafka_topics import TopicName
from onceflow.api.pipeline import ExactlyOnceMode, WorkloadState
from onceflow.api.status import FencingStatus

# A column name of view `input`; bounded so CEL rules over names fit the API server's
# cost budget.
ColumnName = Annotated[str, Field(min_length=1, max_length=128)]

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

    # Bounds on fan-out fields: one tenant's object never costs the shared operator
    # (or the driver) work without limit.
    topics: list[TopicName] | None = Field(
        default=None, min_length=1, max_length=100, description="Topic names."
    )
    sources: list[str] | None = Field(
        default=None,
        min_length=1,
        max_length=50,
        description="KafkaSource names; their spec.topic is read.",
    )
    starting_offsets: Literal["earliest", "latest"] = Field(
        default="earliest", description="Where a job without a checkpoint starts."
    )
    value_schema: str | None = Field(
        default=None,
        min_length=1,
        max_length=16384,
        description="The values are JSON of this schema (Spark DDL, e.g. `id STRING, ts "
        "TIMESTAMP, amount DOUBLE`): its fields become columns of view `input` next to "
        "Kafka's own. A value that does not parse gives nulls, as from_json does.",
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

    @model_validator(mode="after")
    def _schema_adds_columns(self) -> Self:
        self.columns()  # raises, naming the field, on a schema it cannot read
        return self

    def columns(self) -> dict[str, str]:
        """The columns of view ``input`` with their types (lower case): Kafka's, then
        the value schema's fields."""
        if self.value_schema is None:
            return dict(KAFKA_COLUMNS)
        try:
            fields = schema_fields(self.value_schema)
        except ValueError as error:
            raise ValueError(f"input.valueSchema: {error}") from None
        if clash := sorted(f for f in fields if column_type(KAFKA_COLUMNS, f) is not None):
            raise ValueError(
                f"input.valueSchema: field(s) {', '.join(clash)} would hide Kafka's own "
                "column(s) of the same name; rename them in the schema"
            )
        return {**KAFKA_COLUMNS, **fields}


CONFIG_MAP_NEEDS_MODULE = "configMap holds Python files: name the one to run in module"


class Transform(ApiModel):
    """What the job computes: SQL over the view ``input``, or a Python function."""

    model_config = _rules(
        _one_of("sql", "module"),
        {"rule": "!has(self.configMap) || has(self.module)", "message": CONFIG_MAP_NEEDS_MODULE},
    )

    sql: str | None = Field(default=None, min_length=1, description="SQL over view `input`.")
    module: str | None = Field(
        default=None, min_length=1, description="Python module holding the transform."
    )
    function: str = Field(
        default="transform", description="Function (DataFrame) -> DataFrame in `module`."
    )
    config_map: str | None = Field(
        default=None,
        max_length=253,
        pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
        description="ConfigMap in the job's namespace whose keys are Python files "
        "(`<module>.py`, helpers beside it): mounted on the driver, imported from there "
        "and shipped to the executors, so `module` need not be in the image.",
    )

    @model_validator(mode="after")
    def _one_transform(self) -> Self:
        _exactly_one("transform", sql=self.sql, module=self.module)
        if self.config_map is not None and self.module is None:
            raise ValueError(f"transform.configMap: {CONFIG_MAP_NEEDS_MODULE}")
        return self


class KafkaDelivery(StrEnum):
    EXACTLY_ONCE = "exactlyOnce"
    AT_LEAST_ONCE = "atLeastOnce"


class KafkaSink(ApiModel):
    topic: TopicName = Field(description="Output topic.")
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


KafkaSinkWriter = Literal["jvm", "python"]
"""What writes the exactly-once Kafka sink's batches on the executors: the JVM writer
(``jvm/onceflow-spark-kafka``) or the Python one it replaced, kept as a fallback. Both
use the same transactional ids, markers and replay rules, so a job may switch at any
driver restart, even with a batch in flight."""
DEFAULT_KAFKA_SINK_WRITER: KafkaSinkWriter = "jvm"
WRITER_WITHOUT_KAFKA_SINK = (
    "spec.kafkaSinkWriter: only spec.sink.kafka has a writer to choose; remove it"
)
WRITER_RULE = ("!has(self.kafkaSinkWriter) || has(self.sink.kafka)", WRITER_WITHOUT_KAFKA_SINK)


class PostgresSink(ApiModel):
    table: str = Field(min_length=1, description="Target table (schema.table).")
    key: list[str] = Field(
        default_factory=list, max_length=16, description="Upsert key columns; empty means append."
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


DURATION = r"^[0-9]+(ms|s|m|h)$"
_UNITS = {"ms": "milliseconds", "s": "seconds", "m": "minutes", "h": "hours"}


def spark_duration(short: str) -> str:
    """Spark's spelling of a duration: '200ms' -> '200 milliseconds', '10m' -> '10
    minutes'."""
    unit = "ms" if short.endswith("ms") else short[-1]
    return f"{short.removesuffix(unit)} {_UNITS[unit]}"


DEFAULT_PROCESSING_TIME = "1s"


class Trigger(ApiModel):
    """A micro-batch every ``processingTime``, or ``availableNow``: drain what the
    input holds when the driver starts, in batches of ``maxOffsetsPerTrigger``, and
    stop (the SparkJob then reports Completed)."""

    model_config = _rules(
        {
            "rule": "!(has(self.availableNow) && self.availableNow && has(self.processingTime))",
            "message": "set processingTime or availableNow, not both",
        }
    )

    processing_time: str | None = Field(
        default=None,
        pattern=r"^[0-9]+(ms|s|m)$",
        description=f"Micro-batch interval (default {DEFAULT_PROCESSING_TIME}).",
    )
    available_now: bool = Field(
        default=False, description="Process what is there, then stop (backfills, batch runs)."
    )

    @model_validator(mode="after")
    def _one_kind(self) -> Self:
        if self.available_now and self.processing_time is not None:
            raise ValueError("trigger: set processingTime or availableNow, not both")
        return self

    @property
    def spark_interval(self) -> str:
        return spark_duration(self.processing_time or DEFAULT_PROCESSING_TIME)


class Watermark(ApiModel):
    """Event time and how late a record may be: what bounds the state of aggregations
    and of ``dedup`` (Spark drops state older than the watermark)."""

    column: ColumnName = Field(
        description="Event-time column of view `input`: `timestamp` (Kafka's) or a "
        "TIMESTAMP field of input.valueSchema.",
    )
    delay: str = Field(pattern=DURATION, description="Lateness tolerated, e.g. 30s, 10m, 2h.")

    @property
    def spark_delay(self) -> str:
        return spark_duration(self.delay)


class Dedup(ApiModel):
    """Drop records whose id was already seen (Dataflow's record-id dedup, seed 002):
    for inputs that are only at-least-once. Kept in the checkpoint's state store, so a
    restarted driver still knows the ids; an id is forgotten once the watermark passes
    its first event time plus the watermark's delay. Copies of one id must be one record
    (same key, value, headers): which copy is kept is not fixed, so after dedup view
    `input` has no per-delivery columns (topic, partition, offset, timestamp,
    timestampType)."""

    columns: list[ColumnName] = Field(
        min_length=1,
        max_length=16,
        description="Columns of view `input` that together identify a record.",
    )


DEDUP_NEEDS_WATERMARK = "spec.dedup: needs spec.watermark, which bounds how long ids are kept"
DELIVERY_ID = (
    "spec.dedup.columns: {columns} differ between deliveries of one record, so they cannot "
    "identify it; use the record's own id (key, or a field of input.valueSchema)"
)
DELIVERY_EVENT_TIME = (
    "spec.watermark.column: with spec.dedup the event time must come from the record (a "
    "TIMESTAMP field of input.valueSchema): Kafka's {column} differs between deliveries "
    "of one record"
)
_DELIVERY = "[" + ", ".join(f"'{c.lower()}'" for c in DELIVERY_COLUMNS) + "]"
DEDUP_RULES: tuple[tuple[str, str], ...] = (
    ("!has(self.dedup) || has(self.watermark)", DEDUP_NEEDS_WATERMARK),
    (
        f"!has(self.dedup) || !self.dedup.columns.exists(c, c.lowerAscii() in {_DELIVERY})",
        DELIVERY_ID.format(columns=", ".join(DELIVERY_COLUMNS)),
    ),
    (
        f"!has(self.dedup) || !has(self.watermark) || "
        f"!(self.watermark.column.lowerAscii() in {_DELIVERY})",
        DELIVERY_EVENT_TIME.format(column="timestamp"),
    ),
)


class OutputMode(StrEnum):
    APPEND = "append"
    UPDATE = "update"
    COMPLETE = "complete"


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
    cores: int = Field(default=1, ge=1, le=64, description="Driver cores.")
    memory: str = Field(default="1g", pattern=r"^[0-9]+[kmgt]?$", description="Driver memory.")


class ExecutorSpec(ApiModel):
    instances: int = Field(default=1, ge=1, le=1000, description="Executor count.")
    cores: int = Field(default=1, ge=1, le=64, description="Cores per executor.")
    memory: str = Field(default="1g", pattern=r"^[0-9]+[kmgt]?$", description="Executor memory.")


# Spark's keys for CPU requests below a core; Onceflow sizes the spark-submit driver
# pod from the first, Spark the executor pods from the second.
CPU_REQUEST_KEYS = (
    "spark.kubernetes.driver.request.cores",
    "spark.kubernetes.executor.request.cores",
)
DEFAULT_MILLICORES_PER_CORE = 500
"""What a driver or executor requests per Spark core unless sparkConf says otherwise.
Spark asks for a whole core per core, and a first pipeline (two operator replicas,
its tasks, a driver and an executor) then does not fit a two-core node: the executor
stayed Pending. Its threads wait on Kafka and storage as much as they compute, and no
CPU limit is set, so half a core reserved per core still lets them use idle CPU."""
CPU_QUANTITY = re.compile(r"^([0-9]+(\.[0-9]+)?|[0-9]+m)$")


def _cpu_request_rules() -> list[JsonValue]:
    """The CEL twin of ``_cpu_requests_are_quantities``: a pod create that would fail
    with 422 on every retry is refused when the SparkJob is written instead."""
    return [
        {
            "rule": f"!has(self.sparkConf) || !('{key}' in self.sparkConf) || "
            f"isQuantity(self.sparkConf['{key}'])",
            "message": f"sparkConf['{key}'] must be a CPU quantity (e.g. 250m, 1, 1.5)",
        }
        for key in CPU_REQUEST_KEYS
    ]


# The output modes a sink cannot honour exactly once, and why; the CEL rule of each.
COMPLETE_REWRITES = (
    "spec.outputMode: complete rewrites the whole result table on every batch, and no "
    "sink replaces a table in one transaction: spec.sink.kafka would get every row again "
    "each batch, spec.sink.postgres would keep rows that left the result (HAVING, LIMIT); "
    "use update (each batch's changed rows)"
)
REPLACING_FILES = (
    "spec.outputMode: spec.sink.files appends files and cannot replace rows: use append "
    "(with a watermark for aggregations) or the postgres sink with a key"
)
UPDATE_WITHOUT_KEY = (
    "spec.outputMode: without spec.sink.postgres.key every update of a row would be "
    "appended as one more row; set key to the result's grouping columns"
)
OUTPUT_MODE_RULES: tuple[tuple[str, str], ...] = (
    ("self.outputMode != 'append' && has(self.sink.files)", REPLACING_FILES),
    ("self.outputMode == 'complete' && !has(self.sink.files)", COMPLETE_REWRITES),
    (
        "self.outputMode == 'update' && has(self.sink.postgres) && "
        "(!has(self.sink.postgres.key) || size(self.sink.postgres.key) == 0)",
        UPDATE_WITHOUT_KEY,
    ),
)


def output_mode_refusal(mode: OutputMode, sink: Sink) -> str | None:
    """Why ``sink`` cannot take ``mode`` exactly once (None when it can)."""
    if mode is OutputMode.APPEND:
        return None
    if sink.files is not None:
        return REPLACING_FILES
    if mode is OutputMode.COMPLETE:
        return COMPLETE_REWRITES
    if sink.postgres is not None and not sink.postgres.key:
        return UPDATE_WITHOUT_KEY
    return None


def _spark_job_rules() -> ConfigDict:
    mode_rules: list[JsonValue] = [
        {"rule": f"!({rule})", "message": message} for rule, message in OUTPUT_MODE_RULES
    ]
    dedup_rules: list[JsonValue] = [
        {"rule": rule, "message": message} for rule, message in DEDUP_RULES
    ]
    writer_rule: JsonValue = {"rule": WRITER_RULE[0], "message": WRITER_RULE[1]}
    return _rules(*_cpu_request_rules(), *mode_rules, *dedup_rules, writer_rule)


class SparkJobSpec(ApiModel):
    """Desired state of a streaming job."""

    model_config = _spark_job_rules()

    pipeline: str = Field(min_length=1, description="Name of the Pipeline this job belongs to.")
    input: KafkaInput = Field(description="What the job reads.")
    transform: Transform = Field(description="What the job computes.")
    sink: Sink = Field(description="Where results go, exactly once.")
    checkpoint: Checkpoint = Field(description="Where the offset log and state live.")
    trigger: Trigger = Field(default_factory=Trigger, description="Micro-batch trigger.")
    watermark: Watermark | None = Field(
        default=None, description="Event time and allowed lateness of view `input`."
    )
    dedup: Dedup | None = Field(
        default=None, description="Record-id deduplication of view `input` (needs watermark)."
    )
    output_mode: OutputMode = Field(
        default=OutputMode.APPEND,
        description="append: rows once final (aggregations need a watermark); update: "
        "changed rows each batch (postgres sink with key, kafka as a changelog); "
        "complete: refused, no sink can replace a whole table in one transaction.",
    )
    state: WorkloadState = Field(
        default=WorkloadState.RUNNING,
        description="running | paused | stopped. A streaming query cannot hold still, so "
        "paused and stopped both end the driver and executors and keep the checkpoint; "
        "stopped also allows a reset of the input position. The Kafka sink's "
        "transactional ids are fenced once the pods are gone; running again resumes from "
        "the checkpoint. The Pipeline's spec.state wins when it says more.",
    )
    input_reset: InputReset | None = Field(
        default=None,
        description="Move the input position of a stopped job, once per id, by a new "
        "checkpoint (see InputReset); refused unless spec.state is stopped.",
    )
    submitter: Submitter = Field(
        default=Submitter.SPARK_OPERATOR,
        description="spark-operator renders a SparkApplication; spark-submit a Job.",
    )
    image: str | None = Field(default=None, description="Driver/executor image.")
    kafka_sink_writer: KafkaSinkWriter | None = Field(
        default=None,
        description="What writes spec.sink.kafka's batches exactly once on the executors: "
        "jvm (the default: Onceflow's Spark data source, rows never leave the JVM) or "
        "python (the earlier writer, kept to roll back to). Same transactional ids and "
        "markers, so a change (a driver restart) is safe with a batch in flight.",
    )
    driver: DriverSpec = Field(default_factory=DriverSpec, description="Driver resources.")
    executor: ExecutorSpec = Field(default_factory=ExecutorSpec, description="Executors.")
    spark_conf: dict[str, str] = Field(
        default_factory=dict,
        max_length=200,
        description="Extra Spark settings (isolation is set for you).",
    )
    env: list[EnvVar] = Field(
        default_factory=list,
        max_length=100,  # bounds the cost of its CEL rules, as the API server requires
        description="Environment of the driver and every executor (e.g. S3 credentials).",
        # The API server's twin of _env_names_are_unique (a list keyed by name).
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )

    def cpu_request(self, key: str) -> str:
        """The pod's CPU request for one of ``CPU_REQUEST_KEYS``: sparkConf's, or
        ``DEFAULT_MILLICORES_PER_CORE`` per core of that role."""
        cores = self.driver.cores if key == CPU_REQUEST_KEYS[0] else self.executor.cores
        return self.spark_conf.get(key, f"{cores * DEFAULT_MILLICORES_PER_CORE}m")

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

    @model_validator(mode="after")
    def _writer_needs_a_kafka_sink(self) -> Self:
        if self.kafka_sink_writer is not None and self.sink.kafka is None:
            raise ValueError(WRITER_WITHOUT_KAFKA_SINK)
        return self

    @model_validator(mode="after")
    def _output_mode_fits_the_sink(self) -> Self:
        refusal = output_mode_refusal(self.output_mode, self.sink)
        if refusal:
            raise ValueError(refusal)
        return self

    @model_validator(mode="after")
    def _event_time_columns_exist(self) -> Self:
        columns = self.input.columns()
        named = ", ".join(columns)
        if self.watermark is not None:
            found = column_type(columns, self.watermark.column)
            if found is None:
                raise ValueError(
                    f"spec.watermark.column: view `input` has no column "
                    f"{self.watermark.column!r} (it has {named})"
                )
            if not is_event_time(found):
                raise ValueError(
                    f"spec.watermark.column: {self.watermark.column!r} is {found}, not a "
                    "timestamp; use `timestamp` or a TIMESTAMP field of input.valueSchema"
                )
        if self.dedup is not None:
            if self.watermark is None:
                raise ValueError(DEDUP_NEEDS_WATERMARK)
            unknown = [c for c in self.dedup.columns if column_type(columns, c) is None]
            if unknown:
                raise ValueError(
                    f"spec.dedup.columns: view `input` has no column(s) "
                    f"{', '.join(map(repr, unknown))} (it has {named}); add them to "
                    "input.valueSchema"
                )
            delivery = {c.lower() for c in DELIVERY_COLUMNS}
            if per_delivery := [c for c in self.dedup.columns if c.lower() in delivery]:
                raise ValueError(DELIVERY_ID.format(columns=", ".join(per_delivery)))
            if self.watermark.column.lower() in delivery:
                raise ValueError(DELIVERY_EVENT_TIME.format(column=self.watermark.column))
        return self

    @property
    def env_manifest(self) -> list[dict[str, JsonValue]]:
        """``env`` as the containers' ``env`` list."""
        return [variable.manifest() for variable in self.env]


class QueryProgress(ApiModel):
    """The last micro-batch the driver finished, as Spark's query progress reports it."""

    batch_id: int = Field(description="Micro-batch id.")
    timestamp: str = Field(description="When the batch started (UTC).")
    input_rows: int = Field(description="Records the batch read.")
    input_rows_per_second: float | None = Field(
        default=None, description="Records/s arriving since the previous batch."
    )
    processed_rows_per_second: float | None = Field(
        default=None, description="Records/s the batch processed."
    )
    batch_duration_ms: int = Field(description="Wall time of the whole batch.")
    sink_commit_ms: int | None = Field(
        default=None,
        description="Time in the sink (Spark's addBatch): the sink's transactions, and "
        "with the exactly-once sinks also the batch's computation, which Spark runs "
        "lazily inside the sink.",
    )
    state_rows: int | None = Field(
        default=None, description="Rows in state stores (dedup ids, aggregation groups)."
    )
    rows_dropped_by_watermark: int | None = Field(
        default=None,
        description="Records the batch's stateful steps dropped as later than the "
        "watermark (any record, not only duplicates).",
    )
    watermark: str | None = Field(default=None, description="Event-time watermark (UTC).")


class SparkJobStatus(FencingStatus):
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
    progress: QueryProgress | None = Field(
        default=None, description="The driver's last finished micro-batch."
    )
    state: WorkloadState | None = Field(
        default=None,
        description="The state recorded for the job (spec.state combined with the "
        "Pipeline's), written before its driver is removed or submitted again.",
    )
    stop_fenced: bool | None = Field(
        default=None,
        description="Paused or stopped, its pods gone and the Kafka sink's transactional "
        "ids fenced since: nothing of the job can write.",
    )
    input_reset: InputResetStatus | None = Field(
        default=None, description="What became of the last spec.inputReset."
    )


# spark-submit's driver runs as the Job ``<name>-driver`` (and the Spark operator's as
# the pod of that name), whose name Kubernetes copies into a label value: 63 at most.
DRIVER_SUFFIX = "-driver"
SPARK_JOB_NAME_LIMIT = 63 - len(DRIVER_SUFFIX)


class SparkJob(ApiModel):
    """A streaming job of a pipeline."""

    NAME_LIMIT: ClassVar[int] = SPARK_JOB_NAME_LIMIT
    NAME_LIMIT_REASON: ClassVar[str] = f"its driver is named <name>{DRIVER_SUFFIX}"

    api_version: Literal["onceflow.io/v1alpha1"] = "onceflow.io/v1alpha1"
    kind: Literal["SparkJob"] = "SparkJob"
    metadata: ObjectMeta
    spec: SparkJobSpec
    status: SparkJobStatus | None = None

    @model_validator(mode="after")
    def _name_fits_the_driver(self) -> Self:
        if len(self.metadata.name) > self.NAME_LIMIT:
            raise ValueError(
                f"metadata.name: at most {self.NAME_LIMIT} characters, as "
                f"{self.NAME_LIMIT_REASON} (63 at most); choose a shorter name"
            )
        return self
