"""The KafkaSource resource: one connector instance split into tasks, each writing its
records and their source offsets in one Kafka transaction (KIP-618)."""

from __future__ import annotations

import posixpath
from enum import StrEnum
from typing import Annotated, Any, Literal, Self

from pydantic import ConfigDict, Field, model_validator

from onceflow.api.base import ApiModel, LocalObjectReference, ObjectMeta
from onceflow.api.connector import Retention
from onceflow.api.handled_requests import earlier_field
from onceflow.api.kafka_topics import TopicName
from onceflow.api.pipeline import ExactlyOnceMode, WorkloadState
from onceflow.api.status import FencingStatus

# Used when `interval` is chosen without a value: short enough for interactive
# pipelines. Kafka Connect's default (offset.flush.interval.ms, 60 s) is a batch-era
# number that would make every record wait up to a minute to become visible.
DEFAULT_TRANSACTION_INTERVAL_MS = 1000
DEFAULT_TRANSACTION_TIMEOUT_MS = 60000
# Headroom of 2x: the coordinator may abort an expired transaction up to its check
# interval late, but also any time after the timeout; a commit must land well before.
INTERVAL_VS_TIMEOUT = (
    "must be at most half of transactionTimeoutMs, or the broker aborts every "
    "transaction before it commits; lower the interval or raise transactionTimeoutMs"
)


class ExactlyOnceSupport(StrEnum):
    """KIP-618's exactly.once.support: whether the connector must declare support."""

    REQUESTED = "requested"
    REQUIRED = "required"


class TransactionBoundary(StrEnum):
    """When a task commits its open transaction."""

    POLL = "poll"
    INTERVAL = "interval"
    CONNECTOR = "connector"


class ConnectorSpec(ApiModel):
    """Which connector plugin runs and with what settings."""

    type: str = Field(
        min_length=1,
        description="Built-in plugin name (e.g. sequence) or an entry point registered "
        "in the onceflow.connectors group.",
    )
    config: dict[str, Any] = Field(
        default_factory=dict,
        max_length=100,
        description="Connector settings; validated by the connector plugin.",
    )
    secret_ref: LocalObjectReference | None = Field(
        default=None, description="Secret whose keys are merged into the connector config."
    )


QUANTITY = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
"""A Kubernetes quantity as the API server's own schema checks it (500m, 512Mi, 1e3):
refused here, a typo such as ``memory: lots`` would only fail at pod creation."""
Quantity = Annotated[str, Field(pattern=QUANTITY, max_length=64)]


class ResourceRequirements(ApiModel):
    """Kubernetes resource quantities, e.g. {cpu: 500m, memory: 512Mi}."""

    requests: dict[str, Quantity] = Field(
        default_factory=dict, max_length=16, description="Requested quantities."
    )
    limits: dict[str, Quantity] = Field(
        default_factory=dict, max_length=16, description="Quantity limits."
    )


class ClaimSource(ApiModel):
    claim_name: str = Field(
        max_length=253,
        pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
        description="PersistentVolumeClaim in the source's namespace.",
    )


# Names and paths the task pod already uses for its settings, credentials and /tmp.
TASK_POD_VOLUMES = ("config", "kafka", "connector", "tmp")
TASK_POD_MOUNTS = ("/etc/onceflow", "/etc/onceflow-kafka", "/etc/onceflow-connector", "/tmp")
IMAGE_PATHS = (
    "/bin", "/sbin", "/lib", "/lib64", "/usr", "/opt", "/etc", "/home", "/root",
    "/proc", "/sys", "/dev", "/run", "/var/run",
)  # fmt: skip
"""Where the image keeps its code, configuration and the kernel's files: a volume
there (writable by a tenant's driver, say) would replace what the task runs."""


class TaskVolume(ApiModel):
    """A PersistentVolumeClaim mounted into every task pod: where a connector that reads
    files (the files connector) finds them on Kubernetes. (A ConfigMap is not offered:
    its files are symlinks swapped on every update, never appended to.)"""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": f"!(self.name in {list(TASK_POD_VOLUMES)})",
                    "message": "the task pod uses that name ("
                    + ", ".join(TASK_POD_VOLUMES)
                    + "); choose another",
                }
            ]
        }
    )

    name: str = Field(
        max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", description="Volume name."
    )
    mount_path: str = Field(
        max_length=4096, pattern=r"^/", description="Where the task container sees it."
    )
    read_only: bool = Field(default=True, description="Mounted read-only (the default).")
    persistent_volume_claim: ClaimSource = Field(description="The claim to mount.")

    @model_validator(mode="after")
    def _no_clash(self) -> Self:
        if self.name in TASK_POD_VOLUMES:
            raise ValueError(
                f"volumes[{self.name}]: the task pod uses that name; choose another "
                f"(taken: {', '.join(TASK_POD_VOLUMES)})"
            )
        path = self.normal_path
        if path == "/" or any(_nested(path, taken) for taken in TASK_POD_MOUNTS):
            raise ValueError(
                f"volumes[{self.name}].mountPath {self.mount_path!r} overlaps the task "
                f"pod's own mounts ({', '.join(TASK_POD_MOUNTS)}); mount it elsewhere"
            )
        if any(_nested(path, taken) for taken in IMAGE_PATHS):
            raise ValueError(
                f"volumes[{self.name}].mountPath {self.mount_path!r} overlaps the image's "
                f"code or system directories ({', '.join(IMAGE_PATHS)}); mount it under "
                "/data or /mnt"
            )
        return self

    @property
    def normal_path(self) -> str:
        return posixpath.normpath("/" + self.mount_path.lstrip("/"))

    def pod_volume(self) -> dict[str, Any]:
        claim = {"claimName": self.persistent_volume_claim.claim_name}
        return {"name": self.name, "persistentVolumeClaim": claim}

    def mount(self) -> dict[str, Any]:
        return {"name": self.name, "mountPath": self.mount_path, "readOnly": self.read_only}


def _nested(a: str, b: str) -> bool:
    """One path is the other or inside it."""
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


class OffsetEntry(ApiModel):
    """One source partition's offset, in the connector's own shape: ``onceflow offsets
    list`` prints them so, ready to edit."""

    partition: dict[str, Any] = Field(
        min_length=1, max_length=20, description="The source partition (e.g. {stream: s0})."
    )
    offset: dict[str, Any] | None = Field(
        default=None,
        max_length=20,
        description="Where the partition resumes (e.g. {seq: 100}); null forgets its offset, "
        "so it starts from its beginning.",
    )


class OffsetsChange(ApiModel):
    """A one-time change of the source's offsets (Kafka Connect's KIP-875), applied only
    while the source is stopped."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "self.reset || (has(self.offsets) && size(self.offsets) > 0)",
                    "message": "say what to change: reset: true, offsets, or both",
                }
            ]
        }
    )

    id: str = Field(
        min_length=1,
        max_length=63,
        pattern=r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$",
        description="Names this change: it is applied once per id (Argo CD applying the "
        "same manifest again repeats nothing), and status.offsetsChange says what became "
        "of it. A new id while the source is not stopped is refused, never kept for later.",
    )
    reset: bool = Field(
        default=False,
        description="Forget every offset of the source first: it starts from the beginning "
        "of every partition (before `offsets` are written).",
    )
    offsets: list[OffsetEntry] = Field(
        default_factory=list,
        max_length=1000,
        description="Offsets to set, per source partition; checked by the connector.",
    )

    @model_validator(mode="after")
    def _says_something(self) -> Self:
        if not self.reset and not self.offsets:
            raise ValueError(
                "spec.offsetsChange: say what to change: reset: true, offsets, or both"
            )
        return self


class OffsetsChangeResult(StrEnum):
    APPLYING = "Applying"
    APPLIED = "Applied"
    REFUSED = "Refused"


class OffsetsChangeStatus(ApiModel):
    """What became of the last spec.offsetsChange. ``Applying`` is the intent, recorded
    with the checked offsets before anything is written: an operator that restarts
    finishes that very change before the source may move (or resume), whatever the spec
    says by then."""

    id: str = Field(description="The change's id.")
    result: OffsetsChangeResult = Field(description="Applying, Applied or Refused.")
    message: str = Field(default="", description="What was written, or why not.")
    partitions: int = Field(default=0, ge=0, description="Partitions written (reset ones too).")
    reset: bool = Field(
        default=False, description="While Applying: every stored offset is forgotten first."
    )
    writing: list[OffsetEntry] = Field(
        default_factory=list,
        max_length=1000,
        description="While Applying: the offsets being written, as the connector checked them.",
    )
    earlier: list[str] = earlier_field("changes")


LISTED_OFFSETS = 100
"""Partitions a status lists: a files source over a large directory has thousands."""


class StoppedOffsets(ApiModel):
    """The source's offsets as they are while it is stopped (read after the stop was
    fenced, and again after each change): what ``onceflow offsets list`` shows, in the
    shape spec.offsetsChange takes."""

    count: int = Field(ge=0, description="Partitions with an offset.")
    partitions: list[OffsetEntry] = Field(
        default_factory=list, description=f"The first {LISTED_OFFSETS} of them, by partition."
    )


class KafkaSourceSpec(ApiModel):
    """Desired state of a source."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "!has(self.transactionBoundaryIntervalMs) || "
                    "self.transactionBoundary == 'interval'",
                    "message": "transactionBoundaryIntervalMs is only valid with "
                    "transactionBoundary: interval",
                    "fieldPath": ".transactionBoundaryIntervalMs",
                },
                {
                    "rule": "!has(self.transactionBoundaryIntervalMs) || "
                    "!has(self.transactionTimeoutMs) || "
                    "self.transactionBoundaryIntervalMs * 2 <= self.transactionTimeoutMs",
                    "message": INTERVAL_VS_TIMEOUT,
                    "fieldPath": ".transactionBoundaryIntervalMs",
                },
            ]
        }
    )

    pipeline: str = Field(min_length=1, description="Name of the Pipeline this source belongs to.")
    connector: ConnectorSpec = Field(description="The connector plugin and its settings.")
    topic: TopicName = Field(description="Kafka topic the records are written to.")
    tasks_max: int = Field(
        default=1, ge=1, le=1000, description="Upper bound on the number of tasks."
    )
    exactly_once_support: ExactlyOnceSupport = Field(
        default=ExactlyOnceSupport.REQUESTED,
        description="required: refuse to run a connector that does not declare exactly-once "
        "support for this config; requested: run it anyway.",
    )
    transaction_boundary: TransactionBoundary = Field(
        default=TransactionBoundary.POLL,
        description="poll: one transaction per poll() batch; interval: commit every "
        "transactionBoundaryIntervalMs; connector: the connector decides.",
    )
    transaction_boundary_interval_ms: int | None = Field(
        default=None,
        ge=1,
        le=450000,  # half the broker's largest transaction.max.timeout.ms default
        description="Commit interval for transactionBoundary=interval "
        f"(default {DEFAULT_TRANSACTION_INTERVAL_MS}). Only valid with interval.",
    )
    transaction_timeout_ms: int | None = Field(
        default=None,
        ge=1000,
        le=900000,
        description="transaction.timeout.ms of the task producers: the broker aborts a "
        "transaction left open this long (a dead task's, or one whose boundaries come "
        "too rarely). At most the broker's transaction.max.timeout.ms (default 900000); "
        "at least twice transactionBoundaryIntervalMs. Default: "
        f"{DEFAULT_TRANSACTION_TIMEOUT_MS}, or twice the interval when that is more.",
    )
    offsets_topic: TopicName | None = Field(
        default=None,
        description="Compacted topic holding this source's offsets. "
        "Default: <transactionalIdPrefix>-<source>-offsets.",
    )
    state: WorkloadState = Field(
        default=WorkloadState.RUNNING,
        description="running: tasks poll and commit. paused: tasks keep running and keep "
        "their transactional ids, but neither poll nor commit (each pauses at its next "
        "transaction boundary). stopped: no task runs, every transactional id of the "
        "generation is fenced and the offsets stay as they are: the state in which "
        "offsets may be changed. The Pipeline's spec.state wins when it says more.",
    )
    offsets_change: OffsetsChange | None = Field(
        default=None,
        description="Change the source's offsets once, while it is stopped (see "
        "OffsetsChange); `onceflow offsets alter|reset` writes this field.",
    )
    image: str | None = Field(
        default=None, description="Task image; default: the operator's own image."
    )
    resources: ResourceRequirements = Field(
        default_factory=ResourceRequirements,
        description="CPU/memory requests and limits of each task pod.",
    )
    volumes: list[TaskVolume] = Field(
        default_factory=list,
        max_length=20,
        description="Volumes mounted into every task pod (files a connector reads).",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )

    @model_validator(mode="after")
    def _volumes_are_distinct(self) -> Self:
        names = [volume.name for volume in self.volumes]
        if twice := sorted({name for name in names if names.count(name) > 1}):
            raise ValueError(f"volumes: {', '.join(twice)} named more than once")
        paths = [volume.normal_path for volume in self.volumes]
        for i, path in enumerate(paths):
            if any(_nested(path, other) for other in paths[i + 1 :]):
                raise ValueError(
                    f"volumes[{self.volumes[i].name}].mountPath {path} overlaps another "
                    "volume's; give each its own directory"
                )
        return self

    @model_validator(mode="after")
    def _interval_only_with_interval_boundary(self) -> Self:
        if (
            self.transaction_boundary_interval_ms is not None
            and self.transaction_boundary is not TransactionBoundary.INTERVAL
        ):
            raise ValueError(
                "spec.transactionBoundaryIntervalMs is only valid with "
                "transactionBoundary: interval; remove it or set the boundary to interval"
            )
        if self.transaction_timeout_ms is not None and (
            self.transaction_interval_ms * 2 > self.transaction_timeout_ms
        ):
            raise ValueError(f"spec.transactionBoundaryIntervalMs: {INTERVAL_VS_TIMEOUT}")
        return self

    @property
    def transaction_interval_ms(self) -> int:
        return self.transaction_boundary_interval_ms or DEFAULT_TRANSACTION_INTERVAL_MS

    @property
    def transaction_timeout(self) -> int:
        """The producers' transaction.timeout.ms: as set, else the default or twice the
        interval (a spec that set only a long interval keeps working)."""
        if self.transaction_timeout_ms is not None:
            return self.transaction_timeout_ms
        return max(DEFAULT_TRANSACTION_TIMEOUT_MS, 2 * self.transaction_interval_ms)


class TaskStatus(ApiModel):
    """One task of the running generation."""

    id: int = Field(ge=0, description="Task id (0-based).")
    pod: str = Field(description="Pod running the task.")
    phase: str = Field(default="Pending", description="Pod phase.")
    ready: bool = Field(default=False, description="The task's container is running.")
    restarts: int = Field(default=0, ge=0, description="Container restarts in this generation.")
    last_error: str | None = Field(
        default=None,
        description="Why the task's container last ended with an error (its message).",
    )


class RetentionStatus(ApiModel):
    """What the source system keeps for the source until it has read it, as the
    operator last measured it (a CDC slot's WAL)."""

    what: str = Field(description="What is kept (e.g. the WAL of replication slot x).")
    bytes: int = Field(ge=0, description="How much is kept now.")
    limit_bytes: int = Field(ge=0, description="Above this the source is Degraded.")
    limit_from: str = Field(description="Where the limit comes from (the setting to change).")

    @classmethod
    def measured(cls, found: Retention) -> RetentionStatus:
        return cls(
            what=found.what,
            bytes=found.bytes,
            limit_bytes=found.limit_bytes,
            limit_from=found.limit_from,
        )


class KafkaSourceStatus(FencingStatus):
    """Observed state: task generations and their fencing, written only by the operator."""

    generation: int | None = Field(
        default=None, ge=1, description="Task generation now running (or being started)."
    )
    fenced_generation: int | None = Field(
        default=None,
        ge=0,
        description="Generation whose predecessors are all fenced; pods start only when "
        "it equals generation.",
    )
    task_count: int | None = Field(default=None, ge=0, description="Tasks in the generation.")
    mode: ExactlyOnceMode | None = Field(
        default=None, description="Exactly-once mode the generation runs in."
    )
    task_config_hash: str | None = Field(
        default=None, description="Digest of the generation's task configurations."
    )
    transactional_ids: list[str] | None = Field(
        default=None, description="Transactional ids of the generation's tasks."
    )
    offsets_topic: str | None = Field(
        default=None, description="Offsets topic the generation reads and writes."
    )
    incarnation: str | None = Field(
        default=None,
        description="Changes whenever the generation record starts over (a re-created "
        "source, a lost status): tasks of another incarnation are superseded.",
    )
    previous_task_count: int | None = Field(
        default=None,
        ge=0,
        description="Tasks in the previous generation (written by older operators only).",
    )
    previous_transactional_ids: list[str] | None = Field(
        default=None, description="Transactional ids of the previous generation (to fence)."
    )
    previous_mode: ExactlyOnceMode | None = Field(
        default=None, description="Mode of the previous generation."
    )
    previous_offsets_topic: str | None = Field(
        default=None,
        description="Offsets topic of the previous generation, when it differs: offsets "
        "are carried over before the generation starts.",
    )
    state: WorkloadState | None = Field(
        default=None,
        description="The state recorded for the generation (spec.state combined with the "
        "Pipeline's), written before anything is stopped, paused or resumed: tasks read "
        "it, and pause or end by it.",
    )
    stop_fenced: bool | None = Field(
        default=None,
        description="Stopped, and the generation's transactional ids fenced since (or its "
        "non-transactional tasks confirmed gone): nothing of it can write any more.",
    )
    offsets_change: OffsetsChangeStatus | None = Field(
        default=None, description="What became of the last spec.offsetsChange."
    )
    offsets: StoppedOffsets | None = Field(
        default=None,
        description="The offsets while stopped (none while running or paused: they move).",
    )
    ready_tasks: int = Field(default=0, ge=0, description="Tasks whose pods are running.")
    tasks: list[TaskStatus] = Field(default_factory=list, description="Tasks of the generation.")
    retention: RetentionStatus | None = Field(
        default=None,
        description="What the source system keeps until the source reads it, measured on "
        "the operator's passes (CDC: the slot's retained WAL).",
    )


class KafkaSource(ApiModel):
    """A connector instance whose tasks write to Kafka exactly once."""

    api_version: Literal["onceflow.io/v1alpha1"] = "onceflow.io/v1alpha1"
    kind: Literal["KafkaSource"] = "KafkaSource"
    metadata: ObjectMeta
    spec: KafkaSourceSpec
    status: KafkaSourceStatus | None = None
