"""Who says which task generation is current, and whether it may run.

A task asks after ``init_transactions`` (so its own predecessor is already fenced) and
before writing anything: a task of an older generation exits without writing. The
answer comes from the same record the supervisor writes before it starts a new
generation, so a task can never see itself as current after its successor was planned.
It asks again between transactions, at its settings' ``state_look_ms``: a paused
source's tasks hold still there, a stopped one's end.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from onceflow.api.pipeline import WorkloadState
from onceflow.api.task import FileAuthority, GenerationAuthoritySpec, KubernetesAuthority

HTTP_NOT_FOUND = 404
SOURCE_DELETED = sys.maxsize


@dataclass(frozen=True)
class CurrentGeneration:
    incarnation: str
    generation: int
    state: WorkloadState = WorkloadState.RUNNING

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> CurrentGeneration:
        return cls(
            str(record.get("incarnation") or ""),
            int(record.get("generation") or 0),
            WorkloadState(record.get("state") or WorkloadState.RUNNING),
        )

    def supersedes(self, incarnation: str | None, generation: int) -> bool:
        """True when a task of (``incarnation``, ``generation``) must not write: a newer
        generation was planned, or the record started over (re-created source, lost
        status) so the task's numbering means nothing any more. Settings without an
        incarnation (older operators) compare by number only."""
        other_incarnation = incarnation is not None and incarnation != self.incarnation
        return other_incarnation or self.generation > generation


DELETED = CurrentGeneration("", SOURCE_DELETED)
"""Every generation of a deleted source is superseded."""


class GenerationAuthority(Protocol):
    def current(self) -> CurrentGeneration: ...


class FileGenerationAuthority:
    """Standalone mode: the state file ``onceflow run`` keeps per source."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)

    def current(self) -> CurrentGeneration:
        if not self.path.exists():
            return DELETED  # the state was removed: nothing of it is current
        return CurrentGeneration.from_record(json.loads(self.path.read_text()))


class KubernetesGenerationAuthority:
    """On a cluster: ``status.generation`` of the KafkaSource, read with the task's
    ServiceAccount (which may only get KafkaSources in its namespace). The client is
    made once: the task asks again between transactions for as long as it runs."""

    def __init__(self, namespace: str, name: str) -> None:
        self.namespace = namespace
        self.name = name
        self._api: Any = None

    def _objects(self) -> Any:
        if self._api is None:
            from kubernetes import client, config

            try:
                config.load_incluster_config()
            except config.ConfigException:
                config.load_kube_config()
            self._api = client.CustomObjectsApi()
        return self._api

    def current(self) -> CurrentGeneration:
        from kubernetes.client.rest import ApiException

        try:
            obj = self._objects().get_namespaced_custom_object(
                "onceflow.io", "v1alpha1", self.namespace, "kafkasources", self.name
            )
        except ApiException as error:
            if error.status == HTTP_NOT_FOUND:
                return DELETED
            raise
        return CurrentGeneration.from_record(obj.get("status") or {})


def authority_from(spec: GenerationAuthoritySpec) -> GenerationAuthority:
    if isinstance(spec, FileAuthority):
        return FileGenerationAuthority(spec.path)
    if isinstance(spec, KubernetesAuthority):
        return KubernetesGenerationAuthority(spec.namespace, spec.name)
    raise TypeError(f"unknown authority {spec!r}")
