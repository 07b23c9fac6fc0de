"""Test-side access to the real API server: namespaces, Onceflow objects, and a
running operator process with a local kubelet beside it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client, config

from tests.support.kubelet import LocalKubelet
from tests.support.testbed import ROOT, kubectl, script_value
from tests.support.waiting import wait_for

GROUP, VERSION = "onceflow.io", "v1alpha1"


_CRDS_INSTALLED: set[str] = set()
"""API servers (by kubeconfig) this test process installed the CRDs on."""


def install_crds(kubeconfig: str, *, again: bool = False) -> None:
    """Applies ``crds/`` once per API server and test session (two kubectl runs a
    test add up over a suite); ``again``: after a test replaced a CRD."""
    if kubeconfig in _CRDS_INSTALLED and not again:
        return
    kubectl(kubeconfig, "apply", "--server-side", "--force-conflicts", "-f", str(ROOT / "crds"))
    selector = "app.kubernetes.io/part-of=onceflow"
    kubectl(
        kubeconfig, "wait", "--for=condition=Established", "--timeout=60s", "crd", "-l", selector
    )
    _CRDS_INSTALLED.add(kubeconfig)


SPARK_CRD_NAME = "crd/sparkapplications.sparkoperator.k8s.io"
_SPARK_CRD_INSTALLED: set[str] = set()


def install_spark_crd(kubeconfig: str, *, again: bool = False) -> None:
    """The Spark operator's CRD (scripts/spark-operator-crd.sh), once per API server and
    session: applying its 800 KB schema per test cost seconds each. ``again``: after a
    test deleted it."""
    if kubeconfig in _SPARK_CRD_INSTALLED and not again:
        return
    crd = script_value("scripts/spark-operator-crd.sh")
    established = "jsonpath={.status.conditions[?(@.type=='Established')].status}"

    def serving() -> bool:  # applied again while a deletion still finishes
        kubectl(kubeconfig, "apply", "--server-side", "--force-conflicts", "-f", crd)
        found = kubectl(kubeconfig, "get", SPARK_CRD_NAME, "-o", established, check=False)
        return found.stdout == "True"

    wait_for(serving, 60, "the Spark operator's CRD to be established", interval_s=1)
    _SPARK_CRD_INSTALLED.add(kubeconfig)


@dataclass
class Cluster:
    """One test's namespace on the shared API server."""

    kubeconfig: str
    namespace: str

    def __post_init__(self) -> None:
        self.api = config.new_client_from_config(config_file=self.kubeconfig)
        self.core = client.CoreV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)

    def create(self, plural: str, body: dict[str, Any]) -> dict[str, Any]:
        body = {"apiVersion": f"{GROUP}/{VERSION}", **body}
        body["metadata"] = {**body["metadata"], "namespace": self.namespace}
        created: dict[str, Any] = self.custom.create_namespaced_custom_object(
            GROUP, VERSION, self.namespace, plural, body
        )
        return created

    def get(self, plural: str, name: str) -> dict[str, Any]:
        got: dict[str, Any] = self.custom.get_namespaced_custom_object(
            GROUP, VERSION, self.namespace, plural, name
        )
        return got

    def patch_spec(self, plural: str, name: str, spec: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object(
            GROUP, VERSION, self.namespace, plural, name, {"spec": spec}
        )

    def delete(self, plural: str, name: str) -> None:
        self.custom.delete_namespaced_custom_object(GROUP, VERSION, self.namespace, plural, name)

    def status(self, plural: str, name: str) -> dict[str, Any]:
        return self.get(plural, name).get("status") or {}

    def condition(self, plural: str, name: str, type_: str) -> dict[str, Any]:
        for item in self.status(plural, name).get("conditions") or []:
            if item["type"] == type_:
                return dict(item)
        return {}

    def wait_for_reason(
        self, plural: str, name: str, type_: str, reason: str, timeout_s: float, what: str
    ) -> dict[str, Any]:
        """Waits until the condition ``type_`` has ``reason``; returns it."""
        wait_for(
            lambda: self.condition(plural, name, type_).get("reason") == reason, timeout_s, what
        )
        return self.condition(plural, name, type_)

    def pods(self, selector: str = "") -> list[Any]:
        return list(self.core.list_namespaced_pod(self.namespace, label_selector=selector).items)

    def events(self, name: str) -> list[Any]:
        listing = self.core.list_namespaced_event(
            self.namespace, field_selector=f"involvedObject.name={name}"
        )
        return sorted(
            listing.items,
            key=lambda e: int(e.metadata.resource_version),
        )

    def secret(self, name: str, data: dict[str, str]) -> None:
        body = client.V1Secret(metadata=client.V1ObjectMeta(name=name), string_data=data)
        try:
            self.core.create_namespaced_secret(self.namespace, body)
        except client.ApiException as error:
            if error.status != 409:
                raise
            self.core.replace_namespaced_secret(name, self.namespace, body)


def new_namespace(kubeconfig: str, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    api = config.new_client_from_config(config_file=kubeconfig)
    client.CoreV1Api(api).create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=name))
    )
    return name


@dataclass
class OperatorProcess:
    """``onceflow operator`` as a real child process, so tests can SIGKILL it."""

    kubeconfig: str
    namespace: str
    log: Path
    extra: tuple[str, ...] = ("--standalone",)
    process: subprocess.Popen[bytes] | None = None
    environment: tuple[tuple[str, str], ...] = ()
    """Settings beyond the tests' defaults (name, value)."""

    def start(self) -> OperatorProcess:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "onceflow",
                    "operator",
                    "--namespace",
                    self.namespace,
                    "--kubeconfig",
                    self.kubeconfig,
                    *self.extra,
                ],
                stdout=log,
                stderr=log,
                cwd=ROOT,
                env={
                    **os.environ,
                    "PYTHONPATH": str(ROOT),
                    "ONCEFLOW_TASK_IMAGE": "local",
                    "ONCEFLOW_FENCE_TIMEOUT_S": "5",
                    "ONCEFLOW_PEERING_LIFETIME_S": "10",
                    **dict(self.environment),
                },
            )
        return self

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


@contextmanager
def running_operator(
    kubeconfig: str,
    tmp_path: Path,
    prefix: str,
    environment: tuple[tuple[str, str], ...] = (),
    extra: tuple[str, ...] = ("--standalone",),
) -> Iterator[tuple[Cluster, OperatorProcess, LocalKubelet]]:
    install_crds(kubeconfig)
    namespace = new_namespace(kubeconfig, prefix)
    kubelet = LocalKubelet(kubeconfig, namespace, tmp_path / "kubelet").start()
    operator = OperatorProcess(
        kubeconfig, namespace, tmp_path / "operator.log", extra=extra, environment=environment
    ).start()
    try:
        yield Cluster(kubeconfig, namespace), operator, kubelet
    finally:
        operator.stop()
        kubelet.stop()
