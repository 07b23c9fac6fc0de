"""The documentation cannot rot: the site builds with every link and anchor checked, the
field reference matches the models, and nothing in the repository points outside it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

from onceflow.api import InvalidResourceError, parse_resource
from onceflow.api.field_reference import example_documents, examples_by_kind, field_reference

ROOT = Path(__file__).resolve().parents[2]


def test_the_site_builds_with_every_link_and_anchor_checked(tmp_path: Path) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr[-4000:]
    assert (tmp_path / "reference" / "fields" / "index.html").exists()


def test_the_field_reference_is_what_the_models_say() -> None:
    documents = example_documents(ROOT / "examples")
    committed = (ROOT / "docs" / "reference" / "fields.md").read_text()
    assert committed == field_reference(examples_by_kind(documents)), (
        "docs/reference/fields.md drifted from onceflow.api: run `make crds` and commit it"
    )


def test_every_field_of_every_kind_is_in_the_reference() -> None:
    """A field the walk skipped (an array of objects, a map) would be missing silently."""
    text = field_reference({})
    for field in (
        "`spec.kafka.bootstrapServers`",
        "`spec.connector.secretRef.name`",
        "`spec.input.topics`",
        "`status.conditions[].reason`",
    ):
        assert field in text, field


def test_nothing_in_the_repository_points_outside_it() -> None:
    outside = b"../" + b"shared"  # spelled in two, or this file would name itself
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    pointing = [
        name.decode()
        for name in files
        if name
        and (ROOT / name.decode()).is_file()
        and outside in (ROOT / name.decode()).read_bytes()
    ]
    assert pointing == [], f"these point outside the repository, a clone lacks it: {pointing}"


def test_every_test_the_docs_name_exists() -> None:
    """The security page's table says which test holds each line of the trust model:
    a renamed or deleted test would leave the line unproven while the page says it is."""
    named = {
        (path, name)
        for page in (ROOT / "docs").rglob("*.md")
        for path, name in re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", page.read_text())
    }
    assert len(named) >= 20, f"the security page names its tests: found {len(named)}"
    missing = [
        f"{path}::{name}"
        for path, name in sorted(named)
        if not re.search(rf"^def {name}\(", (ROOT / path).read_text(), re.MULTILINE)
    ]
    assert missing == [], f"named in docs/ but not defined: {missing}"


def test_every_onceflow_resource_the_docs_show_is_valid() -> None:
    """A reader copies these: the getting-started page once showed
    `transform: {sql: SELECT key, value FROM input}`, which YAML reads as two keys."""
    shown = 0
    problems = []
    for page in sorted((ROOT / "docs").rglob("*.md")):
        for block in re.findall(r"```yaml\n(.*?)\n```", page.read_text(), re.S):
            for document in yaml.safe_load_all(block):
                if not isinstance(document, dict):
                    continue
                if not str(document.get("apiVersion", "")).startswith("onceflow.io/"):
                    continue
                shown += 1
                try:
                    parse_resource(document)
                except InvalidResourceError as error:
                    problems.append(f"{page.name}: {error}")
    assert shown >= 3, f"only {shown} resources found in docs/"
    assert problems == [], problems
