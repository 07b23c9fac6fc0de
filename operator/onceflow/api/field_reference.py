"""The field reference page (docs/reference/fields.md), generated from the CRDs that are
themselves generated from the pydantic models.

Written from the CRDs rather than the models because the CRD is what the API server
enforces and ``kubectl explain`` shows: the reference then says exactly what a user
meets, defaults and patterns included. Examples come from the repository's example
manifests, so every example shown is one that ``render`` accepts. ``make crds``
writes the page and a test fails when it drifts.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onceflow.api.crd import KINDS, Schema, crd

HEADER = """\
# Field reference

Generated from Onceflow's resource models by `make crds`; do not edit. Every field
of `onceflow.io/v1alpha1` resources, with what the API server checks when you apply
it (the operator's admission webhook and reconcilers check more: their messages name
the field and the fix). `kubectl explain <kind>.spec` shows the same descriptions on
a cluster. Examples come from the manifests under `examples/`.
"""


@dataclass(frozen=True)
class FieldRow:
    path: str
    type: str
    default: str
    checks: str
    description: str
    example: str


def _code(value: Any) -> str:
    text = json.dumps(value, separators=(", ", ": "))
    return f"`{text}`" if len(text) <= 60 else f"`{text[:57]}…`"


def _cell(text: str) -> str:
    """One table cell of prose: a placeholder such as <namespace> stays text, not HTML."""
    return " ".join(text.split()).replace("|", "\\|").replace("<", "&lt;")


def _type(schema: Schema) -> str:
    if schema.get("x-kubernetes-int-or-string"):
        return "integer or string"
    kind = str(schema.get("type", "any"))
    if kind == "array":
        return f"list of {_type(schema.get('items', {}))}"
    if kind == "object" and "additionalProperties" in schema:
        return f"map of {_type(schema['additionalProperties'])}"
    return kind


def _checks(schema: Schema, required: bool) -> str:
    parts = ["required"] if required else []
    if "enum" in schema:
        parts.append("one of " + ", ".join(_code(v) for v in schema["enum"]))
    for key, say in (
        ("minimum", "≥"),
        ("maximum", "≤"),
        ("minLength", "length ≥"),
        ("maxLength", "length ≤"),
        ("minItems", "items ≥"),
        ("maxItems", "items ≤"),
        ("maxProperties", "keys ≤"),
    ):
        if key in schema:
            parts.append(f"{say} {schema[key]}")
    if "pattern" in schema:
        parts.append(f"matches `{schema['pattern']}`")
    parts.extend(rule["message"] for rule in schema.get("x-kubernetes-validations", ()))
    return "; ".join(parts)


def _rows(
    schema: Schema, path: str, required: bool, examples: Mapping[str, Any]
) -> Iterator[FieldRow]:
    yield FieldRow(
        path=f"`{path}`",
        type=_type(schema),
        default=_code(schema["default"]) if "default" in schema else "",
        checks=_cell(_checks(schema, required)),
        description=_cell(str(schema.get("description", ""))),
        example=_code(examples[path]) if path in examples else "",
    )
    children: Schema = schema.get("properties", {})
    needed = set(schema.get("required", ()))
    if schema.get("type") == "array":
        children = schema.get("items", {}).get("properties", {})
        needed = set(schema.get("items", {}).get("required", ()))
        path = f"{path}[]"
    for name, child in children.items():
        yield from _rows(child, f"{path}.{name}", name in needed, examples)


def _scalars(document: Any, path: str) -> Iterator[tuple[str, Any]]:
    """Every (path, value) of a manifest whose value is a scalar or a list of scalars,
    with list items under ``path[]`` as the rows name them."""
    if isinstance(document, Mapping):
        for key, value in document.items():
            yield from _scalars(value, f"{path}.{key}" if path else str(key))
    elif isinstance(document, list) and all(isinstance(v, Mapping) for v in document):
        for item in document:
            yield from _scalars(item, f"{path}[]")
    else:
        yield path, document


def example_documents(directory: Path) -> list[Mapping[str, Any]]:
    """The example manifests' documents, in file name order (the first example of a
    field wins, so the order is part of the page)."""
    import yaml

    return [
        document
        for path in sorted(directory.glob("*.yaml"))
        for document in yaml.safe_load_all(path.read_text())
        if isinstance(document, dict)
    ]


def examples_by_kind(documents: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Kind -> field path -> the first value an example manifest gives it."""
    found: dict[str, dict[str, Any]] = {d.kind: {} for d in KINDS}
    for document in documents:
        kind = document.get("kind")
        if kind not in found:
            continue
        for path, value in _scalars({"spec": document.get("spec", {})}, ""):
            found[kind].setdefault(path, value)
    return found


def _table(rows: Iterable[FieldRow]) -> list[str]:
    lines = [
        "| Field | Type | Default | Checked | Description | Example |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    lines.extend(
        f"| {r.path} | {r.type} | {r.default} | {r.checks} | {r.description} | {r.example} |"
        for r in rows
    )
    return lines


def field_reference(examples: Mapping[str, Mapping[str, Any]]) -> str:
    lines = [HEADER]
    for definition in KINDS:
        version = crd(definition)["spec"]["versions"][0]
        schema = version["schema"]["openAPIV3Schema"]
        lines += [
            f"## {definition.kind}",
            "",
            _cell(str(schema.get("description", ""))),
            "",
            f"`kubectl get {definition.plural}` (short names: "
            + ", ".join(f"`{n}`" for n in definition.short_names)
            + ") shows "
            + ", ".join(c["name"] for c in version["additionalPrinterColumns"])
            + ".",
            "",
            "### spec",
            "",
            *_table(
                _rows(schema["properties"]["spec"], "spec", True, examples.get(definition.kind, {}))
            ),
            "",
            "### status",
            "",
            "Written by the operator; tenants cannot write it.",
            "",
            *_table(_rows(schema["properties"]["status"], "status", False, {})),
            "",
        ]
    return "\n".join(lines)
