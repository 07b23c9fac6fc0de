"""The documentation cannot rot: the site builds with every link and anchor checked, the
field reference matches the models, and nothing in the repository points outside it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
