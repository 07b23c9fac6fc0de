"""The ``onceflow`` command as a user runs it, for tests of its subcommands."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support.testbed import ROOT


def onceflow(*args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    """``onceflow ARGS...`` to its end, its output captured; the caller judges the code."""
    return subprocess.run(
        [sys.executable, "-m", "onceflow", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=timeout_s,
        check=False,
    )
