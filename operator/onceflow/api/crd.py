"""CustomResourceDefinitions generated from the pydantic models.

The models are the single source of truth; ``make crds`` writes the output to
``crds/`` and a test fails when the files drift. Pydantic emits JSON Schema, which
Kubernetes accepts only in its *structural* OpenAPI v3 form: every ``$ref`` inlined,
no ``anyOf`` around optionals, no ``additionalProperties: false`` beside
``properties``, free-form maps marked ``x-kubernetes-preserve-unknown-fields``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from onceflow.api.base import API_GROUP, API_VERSION
from onceflow.api.pipeline import Pipeline
from onceflow.api.source import KafkaSource
from onceflow.api.spark import SparkJob

Schema = dict[str, Any]
_DROPPED_KEYS = {"title", "discriminator"}


def _ready_column() -> dict[str, str]:
    return {
        "name": "Ready",
        "type": "string",
        "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
    }


def _reason_column() -> dict[str, str]:
    """Why it is (not) ready, e.g. Running, WaitingForPredecessors, NameTaken: the
    Ready condition carries the reason of whatever holds the object back."""
    return {
        "name": "Reason",
        "type": "string",
        "jsonPath": '.status.conditions[?(@.type=="Ready")].reason',
    }


_AGE_COLUMN = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}


@dataclass(frozen=True)
class KindDefinition:
    model: type[BaseModel]
    kind: str
    plural: str
    short_names: tuple[str, ...]
    columns: tuple[dict[str, str], ...]


KINDS = (
    KindDefinition(
        Pipeline,
        "Pipeline",
        "pipelines",
        ("pl",),
        (
            {"name": "Target", "type": "string", "jsonPath": ".spec.exactlyOnce"},
            {"name": "State", "type": "string", "jsonPath": ".spec.state"},
            {"name": "Current", "type": "string", "jsonPath": ".status.exactlyOnce.current"},
            {"name": "Step", "type": "string", "jsonPath": ".status.exactlyOnce.step"},
            {
                # What holds end to end, whatever was asked: ExactlyOnce, AtLeastOnce.
                "name": "Guarantee",
                "type": "string",
                "jsonPath": '.status.conditions[?(@.type=="DeliveryGuarantee")].reason',
            },
            _ready_column(),
            _reason_column(),
            _AGE_COLUMN,
        ),
    ),
    KindDefinition(
        KafkaSource,
        "KafkaSource",
        "kafkasources",
        ("ksrc",),
        (
            {"name": "Pipeline", "type": "string", "jsonPath": ".spec.pipeline"},
            {"name": "Generation", "type": "integer", "jsonPath": ".status.generation"},
            {"name": "Tasks", "type": "integer", "jsonPath": ".status.taskCount"},
            {"name": "Running", "type": "integer", "jsonPath": ".status.readyTasks"},
            {"name": "Mode", "type": "string", "jsonPath": ".status.mode"},
            {"name": "State", "type": "string", "jsonPath": ".status.state"},
            _ready_column(),
            _reason_column(),
            _AGE_COLUMN,
        ),
    ),
    KindDefinition(
        SparkJob,
        "SparkJob",
        "sparkjobs",
        ("sj",),
        (
            {"name": "Pipeline", "type": "string", "jsonPath": ".spec.pipeline"},
            {"name": "Mode", "type": "string", "jsonPath": ".status.observedMode"},
            {"name": "State", "type": "string", "jsonPath": ".status.state"},
            {"name": "Application", "type": "string", "jsonPath": ".status.applicationState"},
            _ready_column(),
            _reason_column(),
            _AGE_COLUMN,
        ),
    ),
)


def _structural(node: Any, defs: dict[str, Schema]) -> Any:
    """Rewrites one JSON Schema node into Kubernetes' structural form."""
    if isinstance(node, list):
        return [_structural(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = _structural(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
        # A field's own description wins over the referenced model's docstring.
        return {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    options = node.get("anyOf")
    if options is not None:
        real = [o for o in options if o.get("type") != "null"]
        if len(real) == 1:
            merged = {**_structural(real[0], defs)}
            merged.update({k: _structural(v, defs) for k, v in node.items() if k != "anyOf"})
            merged.pop("default", None) if merged.get("default", 0) is None else None
            return {k: v for k, v in merged.items() if k not in _DROPPED_KEYS}
    out: Schema = {}
    for key, value in node.items():
        if key in _DROPPED_KEYS or key == "$defs":
            continue
        if key == "const":
            out["enum"] = [value]
            continue
        out[key] = _structural(value, defs)
    if out.get("default", 0) is None:
        del out["default"]
    if out.get("additionalProperties") is False:
        del out["additionalProperties"]
    if out.get("type") == "object" and "properties" not in out:
        extra = out.get("additionalProperties")
        if extra in (None, True, {}):
            out.pop("additionalProperties", None)
            out["x-kubernetes-preserve-unknown-fields"] = True
    return out


def openapi_schema(model: type[BaseModel]) -> Schema:
    """Structural schema of ``spec`` and ``status`` of one resource model."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs = raw.get("$defs", {})
    properties = _structural(raw["properties"], defs)
    return {
        "type": "object",
        "description": (model.__doc__ or "").strip().splitlines()[0],
        "required": ["spec"],
        "properties": {"spec": properties["spec"], "status": properties["status"]},
    }


# Kubernetes takes names of custom objects up to 253 characters, but Onceflow copies a
# workload's name into label values and names built on it (63 at most).
LABEL_LIMIT = 63


def name_rule(model: type[BaseModel]) -> Schema:
    """The root CEL rule bounding ``metadata.name``: checked by the API server itself,
    so a name that cannot work is refused at ``kubectl apply`` even without the
    operator's webhook. Only on create (a name never changes): an object stored before
    the rule existed still takes its status, so the operator can say what is wrong."""
    limit = getattr(model, "NAME_LIMIT", LABEL_LIMIT)
    why = getattr(model, "NAME_LIMIT_REASON", "it is used as a label value")
    return {
        "rule": f"oldSelf.hasValue() || self.metadata.name.size() <= {limit}",
        "optionalOldSelf": True,
        "message": f"metadata.name: at most {limit} characters, as {why}",
    }


def crd(definition: KindDefinition) -> Schema:
    schema = {
        **openapi_schema(definition.model),
        "x-kubernetes-validations": [name_rule(definition.model)],
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{definition.plural}.{API_GROUP}",
            "labels": {"app.kubernetes.io/part-of": "onceflow"},
        },
        "spec": {
            "group": API_GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": definition.kind,
                "listKind": f"{definition.kind}List",
                "plural": definition.plural,
                "singular": definition.kind.lower(),
                "shortNames": list(definition.short_names),
                "categories": ["onceflow"],
            },
            "versions": [
                {
                    "name": API_VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": list(definition.columns),
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
        },
    }


def peering_crd(kind: str, plural: str, scope: str) -> Schema:
    """kopf's peering objects: operator replicas announce themselves there, and all
    but the highest-priority one pause, so two replicas never act at once."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.kopf.dev",
            "labels": {"app.kubernetes.io/part-of": "onceflow"},
        },
        "spec": {
            "group": "kopf.dev",
            "scope": scope,
            "names": {"kind": kind, "plural": plural, "singular": kind.lower()},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": "Operator replicas seen alive, with priorities.",
                            "properties": {
                                "status": {
                                    "type": "object",
                                    "description": "Written by kopf: one entry per replica.",
                                    "x-kubernetes-preserve-unknown-fields": True,
                                }
                            },
                        }
                    },
                }
            ],
        },
    }


def crd_documents() -> dict[str, Schema]:
    """File name -> CRD, for every kind and for kopf's peering."""
    documents = {f"{d.plural}.{API_GROUP}.yaml": crd(d) for d in KINDS}
    documents["kopfpeerings.kopf.dev.yaml"] = peering_crd(
        "KopfPeering", "kopfpeerings", "Namespaced"
    )
    documents["clusterkopfpeerings.kopf.dev.yaml"] = peering_crd(
        "ClusterKopfPeering", "clusterkopfpeerings", "Cluster"
    )
    return documents
