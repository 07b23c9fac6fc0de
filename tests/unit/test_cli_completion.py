"""Shell completion, run in a real bash: what a user gets after `source <(onceflow
completion bash)` and a tab."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from onceflow.cli import build_parser
from onceflow.cli_completion import completion_script


def _complete(line: str, tmp_path_cwd: str) -> list[str]:
    """COMPREPLY for the words of ``line`` (a trailing space: completing a new word)."""
    words = line.split() + ([""] if line.endswith(" ") else [])
    script = completion_script(build_parser(), "bash")
    driver = (
        f"{script}\n"
        f"COMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}\n"
        "_onceflow_complete; printf '%s\\n' \"${COMPREPLY[@]}\"\n"
    )
    out = subprocess.run(
        ["bash", "-c", driver], cwd=tmp_path_cwd, capture_output=True, text=True, check=True
    )
    return [w for w in out.stdout.split("\n") if w]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("onceflow r", ["run", "render"]),
        (
            "onceflow ",
            [
                "version",
                "run",
                "render",
                "audit",
                "transactions",
                "offsets",
                "completion",
                "-h",
                "--help",
                "--version",
            ],
        ),
        ("onceflow ta", []),  # the commands Onceflow's pods run are not offered
        ("onceflow render -o ", ["yaml", "json"]),
        ("onceflow run --st", ["--state-dir"]),
        ("onceflow completion ", ["bash", "zsh"]),
        ("onceflow transactions a", ["abort"]),
        ("onceflow offsets ", ["list", "alter", "reset"]),
        ("onceflow audit --isolation read_c", ["read_committed"]),
        ("onceflow run pipe", ["pipeline.yaml"]),
    ],
)
def test_a_tab_offers_what_the_parser_accepts(
    line: str, expected: list[str], tmp_path: Path
) -> None:
    (tmp_path / "pipeline.yaml").write_text("kind: Pipeline\n")
    assert _complete(line, str(tmp_path)) == expected
