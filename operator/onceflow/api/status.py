"""The one status shape every Onceflow kind shares: observedGeneration and
Kubernetes-style conditions (Ready, Progressing, Degraded).

Only the operator writes status, through the status subresource; users never do.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from onceflow.api.base import ApiModel


class ConditionType(StrEnum):
    READY = "Ready"
    PROGRESSING = "Progressing"
    DEGRADED = "Degraded"
    DELIVERY_GUARANTEE = "DeliveryGuarantee"
    """Pipelines only: True while every stage is exactly-once, False (reason
    AtLeastOnce) naming the stages that are not, Unknown before workloads report."""


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Condition(ApiModel):
    """One observation about the resource, in Kubernetes' metav1.Condition shape."""

    type: ConditionType = Field(
        description="Ready, Progressing, Degraded; on Pipelines also DeliveryGuarantee."
    )
    status: ConditionStatus = Field(description="True, False or Unknown.")
    reason: str = Field(
        pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
        max_length=1024,
        description="CamelCase machine-readable cause.",
    )
    message: str = Field(default="", max_length=32768, description="Human-readable detail.")
    last_transition_time: str = Field(description="When status last changed (RFC 3339).")
    last_update_time: str | None = Field(
        default=None,
        description="When reason or message last changed (RFC 3339): for Progressing, the "
        "last progress, which the progress deadline counts from (as a Deployment's).",
    )
    observed_generation: int | None = Field(
        default=None, ge=0, description="metadata.generation this condition was computed from."
    )


class CommonStatus(ApiModel):
    """Fields every kind's status starts with."""

    observed_generation: int | None = Field(
        default=None, ge=0, description="metadata.generation the operator last acted on."
    )
    conditions: list[Condition] = Field(
        default_factory=list, description="Ready, Progressing and Degraded conditions."
    )


class FencingStatus(CommonStatus):
    """The status of a kind whose operator fences transactional ids (a source's task
    generations, a Spark job's sink producers): the backoff after failed fencing is
    kept here, so an operator restarted in the middle of it goes on waiting instead of
    hammering a broker or an ACL that is still missing. And the claim on topics and
    ids the workload was cleared with, which makes it their owner in a collision."""

    topic_claim: str | None = Field(
        default=None,
        description="Digest of this workload's part in the topic graph (its topics, "
        "transactional ids, Pipeline, inputs and checkpoint) as judged free of collisions "
        "(it owns them).",
    )

    fence_failures: int | None = Field(
        default=None,
        ge=1,
        description="Failed fencing attempts in a row: the backoff grows with them, also "
        "across operator restarts.",
    )
    fence_retry_at: str | None = Field(
        default=None, description="When fencing is tried again (RFC 3339), after a failure."
    )
