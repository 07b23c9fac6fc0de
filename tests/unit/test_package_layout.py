"""The package folder `operator/` must never shadow the standard library module."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_import_operator_is_the_standard_library_module() -> None:
    """Run from the repo root with it first on sys.path, the worst case for shadowing."""
    probe = "import operator, onceflow; print(operator.__file__); print(operator.itemgetter)"
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert not out[0].startswith(str(ROOT)), f"operator resolved to {out[0]}"
    assert out[1].startswith("<class 'operator.itemgetter'>")


def test_operator_folder_is_not_a_package() -> None:
    assert not (ROOT / "operator" / "__init__.py").exists()


def test_onceflow_is_importable_from_the_operator_folder() -> None:
    import onceflow

    assert Path(onceflow.__file__).parent == ROOT / "operator" / "onceflow"
