"""The pipeline's Kafka is asked before anything starts: a broker that does not answer
is named against the Pipeline's field, and `onceflow run` starts no task."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from onceflow.eos.broker_check import broker_problems


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A loopback port bound but not listening: every connection is refused."""
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        yield bound.getsockname()[1]


@pytest.mark.kafka
def test_a_live_broker_passes(kafka_bootstrap: str) -> None:
    assert broker_problems(kafka_bootstrap) == []


def test_a_broker_that_does_not_answer_is_named_against_the_field(silent_port: int) -> None:
    [problem] = broker_problems(f"127.0.0.1:{silent_port}", timeout_s=2)
    assert problem.field == "spec.kafka.bootstrapServers", problem
    assert problem.reason == "KafkaUnreachable"
    assert f"no Kafka broker answered at 127.0.0.1:{silent_port} within 2 s" in problem.message


def test_run_starts_nothing_when_its_kafka_does_not_answer(
    silent_port: int, tmp_path: Path
) -> None:
    manifest = tmp_path / "pipeline.yaml"
    manifest.write_text(
        yaml.safe_dump_all(
            [
                {
                    "apiVersion": "onceflow.io/v1alpha1",
                    "kind": "Pipeline",
                    "metadata": {"name": "orders"},
                    "spec": {"kafka": {"bootstrapServers": f"127.0.0.1:{silent_port}"}},
                },
                {
                    "apiVersion": "onceflow.io/v1alpha1",
                    "kind": "KafkaSource",
                    "metadata": {"name": "counter"},
                    "spec": {"pipeline": "orders", "topic": "t", "connector": {"type": "sequence"}},
                },
            ]
        )
    )
    state = tmp_path / "state"
    run = subprocess.run(
        [sys.executable, "-m", "onceflow", "run", str(manifest), "--state-dir", str(state)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 1, run
    assert "Pipeline 'orders': spec.kafka.bootstrapServers: no Kafka broker answered" in run.stderr
    assert "Traceback" not in run.stderr
    assert not state.exists(), "nothing was started, not even the state directory"
