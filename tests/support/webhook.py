"""The operator with its validating webhook registered on the test bed's API server
(a throwaway CA, 127.0.0.1), for the tests that go through admission."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kubernetes import client

from tests.support.cluster import Cluster, OperatorProcess, install_crds, new_namespace
from tests.support.waiting import wait_for

CONFIGURATION = "validation.onceflow.io"


def certificates(directory: Path) -> dict[str, Path]:
    """A throwaway CA and a serving certificate for 127.0.0.1."""
    paths = {n: directory / f"{n}.pem" for n in ("ca", "ca-key", "cert", "key")}
    run = lambda *args: subprocess.run(args, check=True, capture_output=True)  # noqa: E731
    run(
        "openssl",
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=webhook-ca",
        "-keyout",
        str(paths["ca-key"]),
        "-out",
        str(paths["ca"]),
    )
    run(
        "openssl",
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=127.0.0.1",
        "-keyout",
        str(paths["key"]),
        "-out",
        str(directory / "csr.pem"),
    )
    (directory / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    run(
        "openssl",
        "x509",
        "-req",
        "-in",
        str(directory / "csr.pem"),
        "-CA",
        str(paths["ca"]),
        "-CAkey",
        str(paths["ca-key"]),
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        str(directory / "san.ext"),
        "-out",
        str(paths["cert"]),
    )
    return paths


@contextmanager
def webhook_operator(
    kubeconfig: str,
    workdir: Path,
    prefix: str,
    environment: tuple[tuple[str, str], ...] = (),
    also_watch: tuple[str, ...] = (),
) -> Iterator[tuple[Cluster, OperatorProcess]]:
    """A namespace and an operator serving the webhook for it (and for ``also_watch``),
    until the block ends."""
    install_crds(kubeconfig)
    paths = certificates(workdir)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    namespace = new_namespace(kubeconfig, prefix)
    operator = OperatorProcess(
        kubeconfig,
        namespace,
        workdir / "operator.log",
        (
            *(arg for other in also_watch for arg in ("--namespace", other)),
            "--standalone",
            "--webhook-port",
            str(port),
            "--webhook-addr",
            "127.0.0.1",
            "--webhook-host",
            "127.0.0.1",
            "--webhook-cert",
            str(paths["cert"]),
            "--webhook-key",
            str(paths["key"]),
            "--webhook-ca",
            str(paths["ca"]),
        ),
        environment=environment,
    ).start()
    cluster = Cluster(kubeconfig, namespace)
    admission = client.AdmissionregistrationV1Api(cluster.api)

    def registered() -> bool:
        names = [w.metadata.name for w in admission.list_validating_webhook_configuration().items]
        return CONFIGURATION in names

    try:
        wait_for(registered, 60, "kopf to register the validating webhook")
        yield cluster, operator
    finally:
        operator.stop()
        admission.delete_validating_webhook_configuration(CONFIGURATION)
