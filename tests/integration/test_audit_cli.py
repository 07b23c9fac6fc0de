"""`onceflow audit` against a real broker: it never passes what it cannot see."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.kafka import new_topic
from tests.support.testbed import ROOT

pytestmark = pytest.mark.kafka


def _audit(bootstrap: str, topic: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "onceflow",
            "audit",
            "--bootstrap",
            bootstrap,
            "--topic",
            topic,
            "--timeout",
            "30",
            *args,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )


def test_expect_without_the_key_set_is_refused(kafka_bootstrap: str) -> None:
    done = _audit(kafka_bootstrap, new_topic(kafka_bootstrap, "audit-empty"), "--expect", "100")
    assert done.returncode == 2
    assert "--keys N" in done.stderr and "--expect-key" in done.stderr


@pytest.mark.parametrize("keys", [["--keys", "4"], ["--expect-key", "s0"]])
def test_an_empty_topic_fails_the_audit(kafka_bootstrap: str, keys: list[str]) -> None:
    topic = new_topic(kafka_bootstrap, "audit-empty")
    done = _audit(kafka_bootstrap, topic, "--expect", "100", *keys)
    assert done.returncode == 1, done.stdout
    assert "VIOLATIONS FOUND" in done.stdout


def test_a_kafka_config_that_is_no_directory_is_refused_naming_it(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    done = _audit(kafka_bootstrap, "any", "--kafka-config", str(tmp_path / "absent"))
    assert done.returncode == 2
    assert f"--kafka-config {tmp_path / 'absent'}: not a directory" in done.stderr
    assert "Traceback" not in done.stderr
