"""Typed resources from manifest documents, the same YAML users ``kubectl apply``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from onceflow.api.base import GROUP_VERSION
from onceflow.api.errors import InvalidResourceError, Problem, labelled, problems_from
from onceflow.api.pipeline import Pipeline
from onceflow.api.source import KafkaSource
from onceflow.api.spark import SparkJob

Resource = Pipeline | KafkaSource | SparkJob
KINDS: dict[str, type[Resource]] = {
    "Pipeline": Pipeline,
    "KafkaSource": KafkaSource,
    "SparkJob": SparkJob,
}


DEFAULT_NAMESPACE = "default"


@dataclass(frozen=True, order=True)
class ResourceRef:
    """Which object: the identity the API server keeps one object of."""

    kind: str
    namespace: str
    name: str

    @classmethod
    def of(cls, resource: Resource) -> ResourceRef:
        return cls(resource.kind, resource.metadata.namespace, resource.metadata.name)

    @property
    def label(self) -> str:
        """How a message to the object's own tenant names it: kind and name, and the
        namespace unless it is the default one (as kubectl leaves it out)."""
        if self.namespace == DEFAULT_NAMESPACE:
            return f"{self.kind} {self.name!r}"
        return f"{self.kind} {self.name!r} in namespace {self.namespace!r}"

    def __str__(self) -> str:
        """Fully qualified, for the operator's log (never for another tenant)."""
        return f"{self.kind} {self.namespace}/{self.name}"


def parse_resource(document: Mapping[str, Any]) -> Resource:
    """One manifest document as its model, or an error naming each bad field."""
    kind = document.get("kind")
    name = (document.get("metadata") or {}).get("name", "<unnamed>")
    label = f"{kind or 'resource'} {name!r}"
    if document.get("apiVersion") != GROUP_VERSION:
        raise InvalidResourceError(
            label,
            [Problem("apiVersion", f"must be {GROUP_VERSION}, got {document.get('apiVersion')!r}")],
        )
    model = KINDS.get(str(kind))
    if model is None:
        raise InvalidResourceError(
            label, [Problem("kind", f"unsupported kind {kind!r}; expected one of {sorted(KINDS)}")]
        )
    try:
        return model.model_validate(dict(document))
    except ValidationError as error:
        raise InvalidResourceError(label, problems_from(error)) from None


MANIFESTS = "manifests"
"""What ``onceflow render`` and ``onceflow run`` call the files they were given."""


CORE_KINDS = ("Secret", "ConfigMap", "PersistentVolumeClaim")
"""Kubernetes objects a manifest carries beside Onceflow's, as a `kubectl apply -f`
directory does: a workload's inputs (Secrets, ConfigMaps) and its claims."""


def is_core_object(document: Mapping[str, Any]) -> bool:
    return document.get("apiVersion") == "v1" and document.get("kind") in CORE_KINDS


def parse_resources(documents: Iterable[Mapping[str, Any] | None]) -> list[Resource]:
    """Every non-empty document of a manifest stream, in order; or one error with the
    problems of every document, each labelled with its resource."""
    resources: list[Resource] = []
    problems: list[Problem] = []
    for document in documents:
        if not document:
            continue
        try:
            resources.append(parse_resource(document))
        except InvalidResourceError as error:
            metadata = document.get("metadata") or {}
            ref = ResourceRef(
                str(document.get("kind") or "resource"),
                str(metadata.get("namespace") or DEFAULT_NAMESPACE),
                str(metadata.get("name", "<unnamed>")),
            )
            problems += labelled(ref.label, error.problems)
    if problems:
        raise InvalidResourceError(MANIFESTS, problems)
    return resources
