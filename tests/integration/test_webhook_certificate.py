"""The operator keeps its webhook's certificate itself, as the chart runs it: the
first replica creates a CA and serving certificate in a Secret and puts the CA into
the webhook configuration (rendered without one, so `helm template` never changes);
a later replica serves the same certificate. The API server then really calls the
webhook over TLS and gets its verdict."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.support.cluster import Cluster, OperatorProcess, install_crds, new_namespace
from tests.support.testbed import kubectl
from tests.support.waiting import wait_for

# alone: the webhook's configuration is cluster-wide (one name, every namespace's writes).
pytestmark = [pytest.mark.alone, pytest.mark.k8s]
SECRET = "onceflow-webhook-tls"


def _configuration(name: str, port: int, namespace: str) -> dict[str, Any]:
    """What the chart renders: no caBundle, only this namespace."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": "kafkasources.validation.onceflow.io",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Fail",
                "clientConfig": {"url": f"https://127.0.0.1:{port}/validate-kafkasources"},
                "rules": [
                    {
                        "apiGroups": ["onceflow.io"],
                        "apiVersions": ["v1alpha1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["kafkasources"],
                    }
                ],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            }
        ],
    }


@pytest.fixture
def setup(kubeconfig: str, tmp_path: Path) -> Iterator[tuple[Cluster, int, str]]:
    install_crds(kubeconfig)
    namespace = new_namespace(kubeconfig, "hookcert")
    cluster = Cluster(kubeconfig, namespace)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    name = f"onceflow-{namespace}"
    admission = client.AdmissionregistrationV1Api(cluster.api)
    admission.create_validating_webhook_configuration(_configuration(name, port, namespace))
    try:
        yield cluster, port, name
    finally:
        admission.delete_validating_webhook_configuration(name)


def _operator(cluster: Cluster, port: int, configuration: str, log: Path) -> OperatorProcess:
    return OperatorProcess(
        cluster.kubeconfig,
        cluster.namespace,
        log,
        (
            "--standalone",
            *("--webhook-port", str(port), "--webhook-addr", "127.0.0.1"),
            *("--webhook-host", "127.0.0.1"),
            *("--webhook-cert-secret", f"{cluster.namespace}/{SECRET}"),
            *("--webhook-configuration", configuration),
        ),
    ).start()


def _bundle(cluster: Cluster, configuration: str) -> str | None:
    admission = client.AdmissionregistrationV1Api(cluster.api)
    found = admission.read_validating_webhook_configuration(configuration)
    return found.webhooks[0].client_config.ca_bundle  # type: ignore[no-any-return]


def _apply_unknown_connector(cluster: Cluster) -> subprocess.CompletedProcess[str]:
    source = {
        "apiVersion": "onceflow.io/v1alpha1",
        "kind": "KafkaSource",
        "metadata": {"name": "src"},
        "spec": {"pipeline": "orders", "topic": "t", "connector": {"type": "nosuch"}},
    }
    return kubectl(
        cluster.kubeconfig,
        *("-n", cluster.namespace, "apply", "--dry-run=server", "-f", "-"),
        stdin=yaml.safe_dump(source),
        check=False,
    )


def test_the_operator_creates_its_certificate_and_a_restart_serves_the_same(
    setup: tuple[Cluster, int, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster, port, configuration = setup
    monkeypatch.setenv("ONCEFLOW_WEBHOOK_MANAGED", "false")  # the chart owns the configuration
    first = _operator(cluster, port, configuration, tmp_path / "first.log")
    try:
        wait_for(lambda: _bundle(cluster, configuration), 60, "the CA in the configuration")
        wait_for(
            lambda: "unknown connector" in _apply_unknown_connector(cluster).stderr,
            60,
            "the webhook to answer over TLS with its verdict",
        )
    finally:
        first.kill()
    bundle = _bundle(cluster, configuration)
    stored = cluster.core.read_namespaced_secret(SECRET, cluster.namespace).data
    assert sorted(stored) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]

    second = _operator(cluster, port, configuration, tmp_path / "second.log")
    try:
        wait_for(
            lambda: "unknown connector" in _apply_unknown_connector(cluster).stderr,
            60,
            "the restarted operator to answer",
        )
    finally:
        second.stop()
    assert _bundle(cluster, configuration) == bundle
    again = cluster.core.read_namespaced_secret(SECRET, cluster.namespace).data
    assert again == stored, "the restart reused the stored certificate"
