"""The Pipeline resource: shared Kafka settings and one exactly-once mode for a group
of workloads, which the operator rolls out one gated step at a time."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field

from onceflow.api.base import ApiModel, LocalObjectReference, ObjectMeta
from onceflow.api.status import CommonStatus


class ExactlyOnceMode(StrEnum):
    """Delivery mode of a pipeline; rollouts walk it one step at a time, never jumping."""

    DISABLED = "disabled"
    PREPARING = "preparing"
    ENABLED = "enabled"

    @property
    def transactional(self) -> bool:
        """Only ``enabled`` producers use transactions (and so can be fenced)."""
        return self is ExactlyOnceMode.ENABLED

    @property
    def reads_committed(self) -> bool:
        """Consumers must read ``read_committed`` before any producer goes transactional."""
        return self is not ExactlyOnceMode.DISABLED


class WorkloadState(StrEnum):
    """Whether a workload runs (Kafka Connect's RUNNING, PAUSED and STOPPED).

    Ordered: a Pipeline's state and a workload's own combine to the stronger of the two
    (``effective_state``), so pausing a Pipeline pauses every workload without editing
    each, and resuming it leaves a workload stopped on its own stopped."""

    RUNNING = "running"
    PAUSED = "paused"
    STOPPED = "stopped"


STATE_ORDER = (WorkloadState.RUNNING, WorkloadState.PAUSED, WorkloadState.STOPPED)


def effective_state(*states: WorkloadState) -> WorkloadState:
    return max(states, key=STATE_ORDER.index, default=WorkloadState.RUNNING)


class KafkaConnection(ApiModel):
    """How the pipeline's workloads reach Kafka."""

    bootstrap_servers: str = Field(
        min_length=1,
        description="Comma-separated host:port list of the Kafka brokers.",
    )
    auth_secret_ref: LocalObjectReference | None = Field(
        default=None,
        description="Secret holding SASL/TLS client settings (librdkafka keys); never inline.",
    )


class PipelineSpec(ApiModel):
    """Desired state of a pipeline."""

    kafka: KafkaConnection = Field(description="Kafka connection shared by all workloads.")
    exactly_once: ExactlyOnceMode = Field(
        default=ExactlyOnceMode.DISABLED,
        description="Desired end state: disabled | preparing | enabled. The operator "
        "walks there one step at a time, gated on every workload being ready.",
    )
    transactional_id_prefix: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="Prefix of every transactional.id of the pipeline. "
        "Default: <namespace>.<pipeline>.",
    )
    state: WorkloadState = Field(
        default=WorkloadState.RUNNING,
        description="running | paused | stopped for every workload of the pipeline at "
        "once; a workload's own spec.state still applies when it says more (a workload "
        "stopped on its own stays stopped when the pipeline runs).",
    )


class RolloutStatus(ApiModel):
    """Where the gated rollout of the pipeline's exactly-once mode stands."""

    current: ExactlyOnceMode = Field(
        default=ExactlyOnceMode.DISABLED, description="Mode every workload now runs in."
    )
    target: ExactlyOnceMode = Field(
        default=ExactlyOnceMode.DISABLED, description="spec.exactlyOnce, the end state."
    )
    step: str = Field(
        default="",
        description="What the rollout is doing, in a few words (waiting 1/3, to enabled, "
        "stable); the Ready condition's message says it whole, with each workload's reason.",
    )
    waiting_for: list[str] = Field(
        default_factory=list, description="Workloads (Kind/name) not yet ready in `current`."
    )


class WorkloadStatus(ApiModel):
    """One workload of the pipeline as the rollout sees it."""

    kind: str = Field(description="KafkaSource or SparkJob.")
    name: str = Field(description="Name of the workload.")
    observed_mode: ExactlyOnceMode | None = Field(
        default=None, description="Mode the workload reports running in."
    )
    ready: bool = Field(default=False, description="All of its tasks/pods are running.")
    message: str = Field(default="", description="Why it is not ready, if it is not.")


class PipelineStatus(CommonStatus):
    """Observed state of the pipeline's rollout, written only by the operator."""

    exactly_once: RolloutStatus = Field(
        default_factory=RolloutStatus, description="Progress of the exactly-once rollout."
    )
    workloads: list[WorkloadStatus] = Field(
        default_factory=list, description="Every workload of the pipeline."
    )
    accepted_transactional_id_prefix: str | None = Field(
        default=None,
        description="A transactionalIdPrefix outside the Pipeline's namespace that the "
        "operator accepted because the Pipeline ran with it before prefixes were tied to "
        'namespaces ("" when none was): changing it makes it judged like a new one.',
    )


class Pipeline(ApiModel):
    """A group of workloads sharing Kafka settings and one exactly-once mode."""

    api_version: Literal["onceflow.io/v1alpha1"] = "onceflow.io/v1alpha1"
    kind: Literal["Pipeline"] = "Pipeline"
    metadata: ObjectMeta
    spec: PipelineSpec
    status: PipelineStatus | None = None

    @property
    def transactional_id_prefix(self) -> str:
        return self.spec.transactional_id_prefix or (
            f"{self.metadata.namespace}.{self.metadata.name}"
        )
