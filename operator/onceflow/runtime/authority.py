"""Who says which task generation is current.

A task asks after ``init_transactions`` (so its own predecessor is already fenced) and
before writing anything: a task of an older generation exits without writing. The
answer comes from the same record the supervisor writes before it starts a new
generation, so a task can never see itself as current after its successor was planned.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Protocol

from onceflow.api.task import FileAuthority, GenerationAuthoritySpec, KubernetesAuthority

HTTP_NOT_FOUND = 404
SOURCE_DELETED = sys.maxsize


class GenerationAuthority(Protocol):
    def current_generation(self) -> int: ...


class FileGenerationAuthority:
    """Standalone mode: the state file ``onceflow run`` keeps per source."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)

    def current_generation(self) -> int:
        return int(json.loads(self.path.read_text())["generation"])


class KubernetesGenerationAuthority:
    """On a cluster: ``status.generation`` of the KafkaSource, read with the task's
    ServiceAccount (which may only get KafkaSources in its namespace)."""

    def __init__(self, namespace: str, name: str) -> None:
        self.namespace = namespace
        self.name = name

    def current_generation(self) -> int:
        from kubernetes import client, config
        from kubernetes.client.rest import ApiException

        try:
            config.load_incluster_config()
        except config.ConfigException:
            config.load_kube_config()
        try:
            obj = client.CustomObjectsApi().get_namespaced_custom_object(
                "onceflow.io", "v1alpha1", self.namespace, "kafkasources", self.name
            )
        except ApiException as error:
            if error.status == HTTP_NOT_FOUND:
                return SOURCE_DELETED  # every generation of a deleted source is superseded
            raise
        return int((obj.get("status") or {}).get("generation") or 0)


def authority_from(spec: GenerationAuthoritySpec) -> GenerationAuthority:
    if isinstance(spec, FileAuthority):
        return FileGenerationAuthority(spec.path)
    if isinstance(spec, KubernetesAuthority):
        return KubernetesGenerationAuthority(spec.namespace, spec.name)
    raise TypeError(f"unknown authority {spec!r}")
