"""The README's first command, ``make demo``, as a user runs it: its script, against
the test bed's broker. The script waits on what ``onceflow run`` prints, and a
reworded message (a kill naming its signal) broke it unnoticed for a day, as did the
JVM writer becoming the sink's default without the demo building it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.testbed import ROOT

pytestmark = [
    pytest.mark.kafka,
    # Three tasks and a Spark driver, SIGKILLed in turn: a core and a half for its
    # minute and a half, which would starve a neighbour's timing.
    pytest.mark.alone,
]


def test_the_readme_demo_ends_with_both_topics_exactly_once(kafka_bootstrap: str) -> None:
    """The broker the fixture started is the one the script finds (kafka.sh up)."""
    result = subprocess.run(
        ["bash", "scripts/demo.sh"],
        cwd=ROOT,
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    said = result.stdout + result.stderr
    assert result.returncode == 0, said[-4000:]
    assert "Both topics read 1..20000 per stream exactly once." in result.stdout, said[-4000:]
