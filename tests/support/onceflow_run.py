"""``onceflow run`` as a user starts it, for end-to-end tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.support.testbed import ROOT


def pipeline_with_source(
    bootstrap: str, pipeline: str, source: str, spec: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """An exactly-once Pipeline ``pipeline`` on ``bootstrap`` and one KafkaSource
    ``source`` of it (``spec``: its spec but the pipeline): what a run of one source is
    given, by the tests and the benchmarks alike."""
    return [
        {
            "apiVersion": "onceflow.io/v1alpha1",
            "kind": "Pipeline",
            "metadata": {"name": pipeline},
            "spec": {"kafka": {"bootstrapServers": bootstrap}, "exactlyOnce": "enabled"},
        },
        {
            "apiVersion": "onceflow.io/v1alpha1",
            "kind": "KafkaSource",
            "metadata": {"name": source},
            "spec": {"pipeline": pipeline, **spec},
        },
    ]


def _command(manifest: Path, state: Path) -> list[str]:
    return [sys.executable, "-m", "onceflow", "run", str(manifest), "--state-dir", str(state)]


def start_run(
    manifest: Path, state: Path, log: Path, launcher: Sequence[str] = (), **env: str
) -> subprocess.Popen[bytes]:
    """A running ``onceflow run``, its output appended to ``log``; ``launcher`` prefixes
    the command (e.g. ``ip netns exec NAME``: the run and its tasks in a namespace)."""
    return subprocess.Popen(
        [*launcher, *_command(manifest, state)],
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
    )


def run_until_refused(manifest: Path, state: Path) -> subprocess.CompletedProcess[str]:
    """An ``onceflow run`` expected to refuse to start (within two minutes)."""
    return subprocess.run(
        _command(manifest, state),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )


def stop_run(run: subprocess.Popen[bytes]) -> None:
    """SIGINT, as a user stops it; killed if it has not ended within a minute, so a
    hung run never outlives the test that started it."""
    run.send_signal(signal.SIGINT)
    try:
        run.wait(60)
    except subprocess.TimeoutExpired:
        run.kill()
        run.wait(30)
