"""The operator as its own process on the real API server, next to a stand-in kubelet
that runs task pods as local processes: one fresh namespace per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cluster import Cluster, OperatorProcess, running_operator
from tests.support.kubelet import LocalKubelet


@pytest.fixture
def operator(
    request: pytest.FixtureRequest, kubeconfig: str, kafka_bootstrap: str, tmp_path: Path
) -> Iterator[tuple[Cluster, OperatorProcess, LocalKubelet]]:
    """Namespaces are named after the test module, so a leftover one says whose it is."""
    module = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    with running_operator(
        kubeconfig, tmp_path, module.replace("_", "-")[:24].strip("-")
    ) as running:
        yield running
