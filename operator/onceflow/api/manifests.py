"""Typed resources from manifest documents, the same YAML users ``kubectl apply``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from onceflow.api.base import GROUP_VERSION
from onceflow.api.errors import InvalidResourceError, Problem, problems_from
from onceflow.api.pipeline import Pipeline
from onceflow.api.source import KafkaSource
from onceflow.api.spark import SparkJob

Resource = Pipeline | KafkaSource | SparkJob
KINDS: dict[str, type[Resource]] = {
    "Pipeline": Pipeline,
    "KafkaSource": KafkaSource,
    "SparkJob": SparkJob,
}


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


def parse_resources(documents: Iterable[Mapping[str, Any] | None]) -> list[Resource]:
    """Every non-empty document of a manifest stream, in order."""
    return [parse_resource(doc) for doc in documents if doc]
