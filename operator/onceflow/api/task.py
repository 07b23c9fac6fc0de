"""What one task process is told: the contract between whoever plans a generation
(the operator or ``onceflow run``) and the ``onceflow task`` process.

It travels as JSON (a per-generation ConfigMap on Kubernetes, a file standalone), so
it is versioned by the resource API version and validated on both ends.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from onceflow.api.base import ApiModel
from onceflow.api.pipeline import ExactlyOnceMode
from onceflow.api.source import ExactlyOnceSupport, TransactionBoundary


class FileAuthority(ApiModel):
    """Standalone: the generation lives in the state file ``onceflow run`` writes."""

    kind: Literal["file"] = "file"
    path: str = Field(description="Path of the standalone state file of the source.")


class KubernetesAuthority(ApiModel):
    """On a cluster: the generation is ``status.generation`` of the KafkaSource."""

    kind: Literal["kubernetes"] = "kubernetes"
    namespace: str
    name: str


GenerationAuthoritySpec = Annotated[
    FileAuthority | KubernetesAuthority, Field(discriminator="kind")
]


class TaskSettings(ApiModel):
    """Everything a task process needs; nothing is read from the environment."""

    source: str = Field(description="Name of the KafkaSource.")
    namespace: str = Field(
        default="default", description="Namespace of the KafkaSource (part of offset keys)."
    )
    incarnation: str | None = Field(
        default=None,
        description="The generation record's incarnation: a task of another incarnation "
        "is superseded whatever its generation number (None: settings of an older "
        "operator, compared by generation only).",
    )
    task_id: int = Field(ge=0)
    generation: int = Field(ge=1, description="Task generation this config belongs to.")
    mode: ExactlyOnceMode
    bootstrap_servers: str
    kafka_config: dict[str, str] = Field(
        default_factory=dict, description="Extra librdkafka settings (no secrets)."
    )
    kafka_config_dir: str | None = Field(
        default=None,
        description="Directory of files named after librdkafka settings (a mounted "
        "Secret): SASL/TLS credentials never travel inside the task config itself.",
    )
    topic: str
    offsets_topic: str
    transactional_id: str
    connector_type: str
    connector_config: dict[str, Any] = Field(default_factory=dict)
    connector_secret_dir: str | None = Field(
        default=None,
        description="Directory of the connector's Secret (``spec.connector.secretRef``), "
        "one file per key: the task hands the keys to the connector as its secrets.",
    )
    exactly_once_support: ExactlyOnceSupport = Field(
        default=ExactlyOnceSupport.REQUESTED,
        description="The source's spec.exactlyOnceSupport: under required, a task that "
        "finds at start that its system cannot give exactly-once stops with an error "
        "(requested: settings of an older operator, which did not say).",
    )
    transaction_boundary: TransactionBoundary = TransactionBoundary.POLL
    transaction_interval_ms: int = Field(default=1000, ge=1)
    transaction_timeout_ms: int = Field(
        default=60000,
        ge=1000,
        description="Broker aborts a transaction left open this long by a dead task.",
    )
    offset_flush_interval_ms: int = Field(
        default=1000, ge=1, description="Offset flush cadence in non-transactional modes."
    )
    authority: GenerationAuthoritySpec
    state_look_ms: int = Field(
        default=5000,
        ge=100,
        description="How often, between transactions, the task asks its authority "
        "whether it is paused, stopped or superseded: how soon a pause takes hold.",
    )

    @property
    def offsets_owner(self) -> str:
        """The first element of this source's offset keys: source names are unique only
        per namespace, and an offsets topic may be shared across namespaces."""
        return f"{self.namespace}/{self.source}"

    metrics_port: int = Field(default=0, ge=0, le=65535, description="0 disables /metrics.")
