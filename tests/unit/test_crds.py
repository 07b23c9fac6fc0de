"""The CRDs in crds/ (and the Helm chart's copy) are exactly what the models generate,
and teach via descriptions."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from onceflow.api.crd import crd_documents
from onceflow.cli import render_yaml
from tests.support.testbed import ROOT


@pytest.mark.parametrize("directory", ["crds", "helm/onceflow/files/crds"])
@pytest.mark.parametrize("name", sorted(crd_documents()))
def test_committed_crd_matches_the_models(directory: str, name: str) -> None:
    committed = (ROOT / directory / name).read_text()
    assert committed == render_yaml(crd_documents()[name], yaml), (
        f"{directory}/{name} drifted from onceflow.api: run `make crds` and commit the result"
    )


def test_the_chart_carries_no_stale_crd() -> None:
    shipped = {p.name for p in (ROOT / "helm/onceflow/files/crds").glob("*.yaml")}
    assert shipped == set(crd_documents())


def _undocumented(node: dict[str, Any], path: str) -> list[str]:
    missing = []
    for key, child in (node.get("properties") or {}).items():
        if "description" not in child:
            missing.append(f"{path}.{key}")
        missing += _undocumented(child, f"{path}.{key}")
    if isinstance(node.get("items"), dict):
        missing += _undocumented(node["items"], f"{path}[]")
    return missing


@pytest.mark.parametrize("name", sorted(crd_documents()))
def test_every_field_has_a_description_for_kubectl_explain(name: str) -> None:
    schema = crd_documents()[name]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert _undocumented(schema, name.split(".", maxsplit=1)[0]) == []


def test_schemas_are_structural() -> None:
    text = yaml.safe_dump(list(crd_documents().values()))
    for forbidden in ("$ref", "anyOf", "additionalProperties: false", "title:", "const:"):
        assert forbidden not in text
