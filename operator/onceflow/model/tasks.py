"""Desired task settings of a source generation, from its Pipeline and KafkaSource.

Shared by the operator (it renders them into the generation's ConfigMap) and by
``onceflow run`` (it writes them to files), so both run identical tasks.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from onceflow.api.pipeline import ExactlyOnceMode, Pipeline, WorkloadState, effective_state
from onceflow.api.source import ExactlyOnceSupport, KafkaSource
from onceflow.api.task import GenerationAuthoritySpec, TaskSettings
from onceflow.model.names import offsets_topic, task_transactional_ids
from onceflow.model.objects import CONNECTOR_SECRET_MOUNT


def fingerprint(task_configs: Sequence[Mapping[str, Any]], **settings: object) -> str:
    """A digest of everything that, when changed, needs a new task generation."""
    canonical = json.dumps(
        {"tasks": list(task_configs), "settings": settings}, sort_keys=True, default=str
    )
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


OffsetEntries = tuple[tuple[Mapping[str, Any], Mapping[str, Any] | None], ...]
"""(source partition, offset or None to forget it), in the connector's shapes."""


@dataclass(frozen=True)
class OffsetsRequest:
    """spec.offsetsChange as the generation protocol sees it."""

    id: str
    reset: bool
    entries: OffsetEntries


@dataclass(frozen=True)
class DesiredGeneration:
    """What the spec asks a generation to be, as the generation protocol sees it."""

    task_count: int
    mode: ExactlyOnceMode
    fingerprint: str
    ids: tuple[str, ...]
    offsets_topic: str
    state: WorkloadState = WorkloadState.RUNNING
    """Not part of the fingerprint: pausing, stopping and resuming keep the generation
    (and its transactional ids and offsets)."""
    offsets_change: OffsetsRequest | None = None


@dataclass(frozen=True)
class DesiredTasks:
    """The task configs the connector planned, and the digest that names them."""

    pipeline: Pipeline
    source: KafkaSource
    task_configs: tuple[Mapping[str, Any], ...]
    bootstrap_servers: str
    mode: ExactlyOnceMode
    """The mode tasks run in: the rollout's current step on a cluster, not the target."""
    kafka_config_dir: str | None = None

    @property
    def fingerprint(self) -> str:
        spec = self.source.spec
        return fingerprint(
            self.task_configs,
            mode=self.mode.value,
            bootstrap=self.bootstrap_servers,
            prefix=self.pipeline.transactional_id_prefix,
            ids=self.ids,
            connector=spec.connector.type,
            topic=spec.topic,
            offsets=self.offsets_topic,
            boundary=spec.transaction_boundary.value,
            interval=spec.transaction_interval_ms,
            timeout=spec.transaction_timeout,
            # Tasks act on it at start (TaskSettings.exactly_once_support), so a change
            # needs a new generation. Named only when required: the digests of sources
            # under the default stay what they were before tasks were told.
            **(
                {"support": spec.exactly_once_support.value}
                if spec.exactly_once_support is ExactlyOnceSupport.REQUIRED
                else {}
            ),
        )

    @property
    def task_count(self) -> int:
        return len(self.task_configs)

    @property
    def ids(self) -> tuple[str, ...]:
        prefix = self.pipeline.transactional_id_prefix
        return task_transactional_ids(prefix, self.source.metadata.name, self.task_count)

    @property
    def offsets_topic(self) -> str:
        return offsets_topic(self.pipeline, self.source)

    @property
    def state(self) -> WorkloadState:
        return effective_state(self.pipeline.spec.state, self.source.spec.state)

    @property
    def generation(self) -> DesiredGeneration:
        change = self.source.spec.offsets_change
        request = (
            None
            if change is None
            else OffsetsRequest(
                change.id, change.reset, tuple((e.partition, e.offset) for e in change.offsets)
            )
        )
        return DesiredGeneration(
            self.task_count,
            self.mode,
            self.fingerprint,
            self.ids,
            self.offsets_topic,
            self.state,
            request,
        )

    def settings(
        self,
        generation: int,
        authority: GenerationAuthoritySpec,
        kafka_config: Mapping[str, str] | None = None,
        metrics_port: int = 0,
        incarnation: str | None = None,
    ) -> list[TaskSettings]:
        spec = self.source.spec
        name = self.source.metadata.name
        ids = self.ids
        return [
            TaskSettings(
                source=name,
                namespace=self.source.metadata.namespace,
                incarnation=incarnation,
                task_id=task_id,
                generation=generation,
                mode=self.mode,
                bootstrap_servers=self.bootstrap_servers,
                kafka_config=dict(kafka_config or {}),
                kafka_config_dir=self.kafka_config_dir,
                topic=spec.topic,
                offsets_topic=self.offsets_topic,
                transactional_id=ids[task_id],
                connector_type=spec.connector.type,
                connector_config=dict(config),
                connector_secret_dir=CONNECTOR_SECRET_MOUNT if spec.connector.secret_ref else None,
                exactly_once_support=spec.exactly_once_support,
                transaction_boundary=spec.transaction_boundary,
                transaction_interval_ms=spec.transaction_interval_ms,
                transaction_timeout_ms=spec.transaction_timeout,
                authority=authority,
                metrics_port=metrics_port,
            )
            for task_id, config in enumerate(self.task_configs)
        ]


def desired_tasks(
    pipeline: Pipeline,
    source: KafkaSource,
    task_configs: Sequence[Mapping[str, Any]],
    bootstrap_override: str | None = None,
    *,
    mode: ExactlyOnceMode | None = None,
    kafka_config_dir: str | None = None,
) -> DesiredTasks:
    return DesiredTasks(
        pipeline,
        source,
        tuple(task_configs),
        bootstrap_override or pipeline.spec.kafka.bootstrap_servers,
        mode or pipeline.spec.exactly_once,
        kafka_config_dir,
    )
