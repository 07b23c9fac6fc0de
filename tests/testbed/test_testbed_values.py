"""`up` and `status` of a running service print exactly one well-formed value.

The fixtures start each service first, so these runs take the "already running"
branches, where readiness probes (kubectl's "ok", etcd's health JSON) used to print to
stdout beside the value.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.testbed import ROOT


def _stdout(script: str, action: str) -> str:
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / script), action],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHON": sys.executable},
        check=True,
        timeout=180,
    )
    return done.stdout


@pytest.mark.parametrize("action", ["up", "status"])
def test_kafka_script_prints_only_the_bootstrap_address(kafka_bootstrap: str, action: str) -> None:
    assert re.fullmatch(r"127\.0\.0\.1:\d+\n", _stdout("kafka.sh", action))


@pytest.mark.parametrize("action", ["up", "status"])
def test_k8s_script_prints_only_the_kubeconfig_path(kubeconfig: str, action: str) -> None:
    assert _stdout("k8s.sh", action) == f"{kubeconfig}\n"


@pytest.mark.parametrize("action", ["up", "status"])
def test_postgres_script_prints_only_the_dsn(postgres_dsn: str, action: str) -> None:
    assert _stdout("postgres.sh", action) == f"{postgres_dsn}\n"


def test_s3proxy_starts_from_an_empty_state_dir_and_prints_only_its_endpoint(
    tmp_path: Path,
) -> None:
    """A fresh checkout has no .onceflow/s3proxy yet (the first CI run's failure)."""
    env = {**os.environ, "ONCEFLOW_STATE": str(tmp_path / "state"), "S3_PORT": "19907"}

    def s3proxy(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", str(ROOT / "scripts" / "s3proxy.sh"), *args],
            capture_output=True,
            text=True,
            env=env,
            check=False,
            timeout=180,
        )

    try:
        up = s3proxy("up")
        assert up.returncode == 0, up.stderr
        assert up.stdout == "http://127.0.0.1:19907\n"
        made = s3proxy("bucket", "fresh-bucket")
        assert made.returncode == 0 and made.stdout == "", made.stderr
    finally:
        s3proxy("down")
