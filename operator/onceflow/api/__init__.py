"""Pydantic models of Onceflow's custom resources: the single source of truth for the
CRD schemas, the operator, the standalone runner and the CLI."""

from onceflow.api.base import (
    API_GROUP,
    API_VERSION,
    GROUP_VERSION,
    LocalObjectReference,
    ObjectMeta,
)
from onceflow.api.errors import InvalidResourceError
from onceflow.api.manifests import Resource, parse_resource, parse_resources
from onceflow.api.pipeline import ExactlyOnceMode, KafkaConnection, Pipeline, PipelineSpec
from onceflow.api.source import (
    ConnectorSpec,
    ExactlyOnceSupport,
    KafkaSource,
    KafkaSourceSpec,
    TransactionBoundary,
)

__all__ = [
    "API_GROUP",
    "API_VERSION",
    "GROUP_VERSION",
    "ConnectorSpec",
    "ExactlyOnceMode",
    "ExactlyOnceSupport",
    "InvalidResourceError",
    "KafkaConnection",
    "KafkaSource",
    "KafkaSourceSpec",
    "LocalObjectReference",
    "ObjectMeta",
    "Pipeline",
    "PipelineSpec",
    "Resource",
    "TransactionBoundary",
    "parse_resource",
    "parse_resources",
]
