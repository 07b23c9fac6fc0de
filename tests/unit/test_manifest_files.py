"""Manifests as kubectl's -f takes them (files, directories, - for stdin), and every
mistake in a file an error naming it, never a traceback: the newcomer review's file
cases, through both commands that read manifests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.testbed import ROOT

QUICKSTART = (ROOT / "examples" / "quickstart.yaml").read_text()


def onceflow(
    *args: str, stdin: str = "", cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "onceflow", *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
    )


def both(tmp_path: Path, *files: str, stdin: str = "") -> list[subprocess.CompletedProcess[str]]:
    """``render`` and ``run`` on the same files (``run`` refuses before it starts)."""
    state = str(tmp_path / "state")
    return [
        onceflow("render", *files, stdin=stdin),
        onceflow("run", "--state-dir", state, *files, stdin=stdin),
    ]


@pytest.mark.parametrize(
    ("name", "content", "says"),
    [
        (
            "broken.yaml",
            "kind: Pipeline\nmetadata: {name: x\nspec: {}\n",
            "broken.yaml:3:5: not valid YAML",
        ),
        ("binary.yaml", b"\x89PNG\r\n\x1a\n\x00\xff".decode("latin-1"), "not a text file"),
        (
            "list.yaml",
            "- kind: Pipeline\n- kind: KafkaSource\n",
            "document 1 is a list, not a resource",
        ),
        ("text.yaml", "just some words\n", "document 1 is a text, not a resource"),
        ("empty.yaml", "# nothing here\n---\n", "no resources in it"),
    ],
)
def test_a_file_that_holds_no_resources_is_an_error_naming_it(
    tmp_path: Path, name: str, content: str, says: str
) -> None:
    path = tmp_path / name
    if name == "binary.yaml":
        path.write_bytes(content.encode("latin-1"))
    else:
        path.write_text(content)
    for result in both(tmp_path, str(path)):
        assert result.returncode == 1, result
        assert result.stderr.startswith("error: ") and says in result.stderr, result.stderr
        assert "Traceback" not in result.stderr
    assert not (tmp_path / "state").exists()


def test_missing_paths_and_directories_without_manifests_are_errors(tmp_path: Path) -> None:
    (tmp_path / "empty-dir").mkdir()
    for given, says in (
        (str(tmp_path / "nope.yaml"), "nope.yaml: no such file or directory"),
        (str(tmp_path / "empty-dir"), "empty-dir: a directory without .yaml, .yml, .json files"),
    ):
        for result in both(tmp_path, given):
            assert result.returncode == 1 and says in result.stderr, result.stderr
    for result in both(tmp_path):
        assert result.returncode == 1 and "no manifests given" in result.stderr


def test_files_directories_and_stdin_are_read_as_kubectl_reads_them(tmp_path: Path) -> None:
    documents = [d for d in yaml.safe_load_all(QUICKSTART) if d]
    directory = tmp_path / "pipeline"
    directory.mkdir()
    (directory / "1-pipeline.yaml").write_text(yaml.safe_dump(documents[0]))
    (directory / "2-rest.yml").write_text(yaml.safe_dump_all(documents[1:]))
    (directory / "notes.txt").write_text("not a manifest")
    expected = onceflow("render", str(ROOT / "examples" / "quickstart.yaml"))
    assert expected.returncode == 0, expected.stderr
    assert onceflow("render", str(directory)).stdout == expected.stdout
    assert onceflow("render", "-f", str(directory / "1-pipeline.yaml"), "-f",
                    str(directory / "2-rest.yml")).stdout == expected.stdout  # fmt: skip
    assert onceflow("render", "-", stdin=QUICKSTART).stdout == expected.stdout
    as_list = json.dumps({"apiVersion": "v1", "kind": "List", "items": documents})
    assert onceflow("render", "-", stdin=as_list).stdout == expected.stdout
    rendered = json.loads(onceflow("render", "-o", "json", "-", stdin=QUICKSTART).stdout)
    assert rendered["kind"] == "List"
    assert rendered["items"] == [d for d in yaml.safe_load_all(expected.stdout) if d]


def test_the_version_is_printed_both_ways() -> None:
    from importlib.metadata import version

    expected = f"onceflow {version('onceflow')}\n"
    assert onceflow("version").stdout == expected
    assert onceflow("--version").stdout == expected
