"""The chart's namespaced mode, installed for real with Helm, is all the operator needs
and no more: the operator runs as the chart's ServiceAccount (a token the API server
issues) through a whole pipeline's life, and the API server's audit log shows which
verbs it used. Every call succeeds (no 403), every granted verb is used, and the
account can do nothing outside the watched namespace."""

from __future__ import annotations

import contextlib
import json
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from onceflow.control.admission import review
from onceflow.control.kube import KubeClient, load_config
from tests.integration.test_operator import pipeline, source
from tests.integration.test_operator_spark import _job
from tests.support.api_audit import calls_by, granted
from tests.support.cluster import (
    Cluster,
    OperatorProcess,
    install_crds,
    install_spark_crd,
    new_namespace,
)
from tests.support.kubelet import LocalKubelet
from tests.support.testbed import ROOT, helm, kubectl
from tests.support.waiting import wait_for

# alone: a release installs cluster-wide objects, and the audit log is the API server's.
pytestmark = [pytest.mark.alone, pytest.mark.k8s, pytest.mark.kafka]

CHART = str(ROOT / "helm" / "onceflow")


def _audit_log(kubeconfig: str) -> Path:
    """Where scripts/k8s.sh has the API server write its audit log."""
    return Path(kubeconfig).parent / "k8s" / "audit.log"


def _token_kubeconfig(kubeconfig: str, namespace: str, account: str, path: Path) -> str:
    """The admin kubeconfig's cluster with the account's token as its only user."""
    token = kubectl(
        kubeconfig, "create", "token", account, "-n", namespace, "--duration=2h"
    ).stdout.strip()
    admin = yaml.safe_load(Path(kubeconfig).read_text())
    admin["users"] = [{"name": account, "user": {"token": token}}]
    for context in admin["contexts"]:
        context["context"]["user"] = account
    path.write_text(yaml.safe_dump(admin))
    return str(path)


@pytest.fixture
def installed(kubeconfig: str) -> Iterator[tuple[str, str, str]]:
    """(release namespace, watched namespace, the operator's account) of a namespaced
    install; uninstalled after the test."""
    install_crds(kubeconfig)
    install_spark_crd(kubeconfig)
    home, watched = new_namespace(kubeconfig, "lp-sys"), new_namespace(kubeconfig, "lp")
    release = f"lp-{uuid.uuid4().hex[:6]}"
    values = [
        "--set",
        "crds.install=false",
        "--set",
        f"watchNamespaces={{{watched}}}",
        # No operator pod runs on the test bed to answer a webhook.
        "--set",
        "webhook.enabled=false",
    ]
    helm(kubeconfig, "install", release, CHART, "-n", home, *values)
    try:
        yield home, watched, f"{release}-onceflow"
    finally:
        helm(kubeconfig, "uninstall", release, "-n", home, "--wait", check=False)


def test_the_namespaced_install_grants_what_the_operator_uses_and_nothing_else(
    kubeconfig: str, kafka_bootstrap: str, installed: tuple[str, str, str], tmp_path: Path
) -> None:
    home, watched, account = installed
    user = f"system:serviceaccount:{home}:{account}"
    cluster_wide = kubectl(kubeconfig, "get", "clusterrolebindings", "-o", "json").stdout
    assert account not in cluster_wide, "namespaced mode binds nothing cluster-wide"
    for verb, what in (("get", "secrets"), ("create", "pods"), ("list", "kafkasources")):
        elsewhere = kubectl(
            kubeconfig, "auth", "can-i", verb, what, "-n", home, f"--as={user}", check=False
        )
        assert elsewhere.stdout.strip() == "no", f"{verb} {what} outside {watched}"

    as_operator = _token_kubeconfig(kubeconfig, home, account, tmp_path / "operator.kubeconfig")
    kubelet = LocalKubelet(kubeconfig, watched, tmp_path / "kubelet").start()
    operator = OperatorProcess(
        as_operator,
        watched,
        tmp_path / "operator.log",
        extra=("--peering=onceflow", f"--peering-owner={account}"),
    ).start()
    cluster = Cluster(kubeconfig, watched)
    try:
        with _garbage_collector(cluster):
            _a_pipelines_life(cluster, kafka_bootstrap)
        _the_webhook_judges_with_these_rights(as_operator, watched)
    finally:
        operator.stop()
        kubelet.stop()

    used, refused = calls_by(_audit_log(kubeconfig), user)
    assert not refused, f"the namespaced Role lacks: {refused}\n{operator.log.read_text()[-3000:]}"
    role = json.loads(
        kubectl(kubeconfig, "get", "role", account, "-n", watched, "-o", "json").stdout
    )
    unused = granted(role) - used
    assert not unused, f"granted but never used: {sorted(unused)}"
    # `helm uninstall` deletes the Role, and with it (the garbage collector) the peering.
    peering = json.loads(
        kubectl(kubeconfig, "get", "kopfpeering", "onceflow", "-n", watched, "-o", "json").stdout
    )
    owners = [(o["kind"], o["name"], o["uid"]) for o in peering["metadata"]["ownerReferences"]]
    assert owners == [("Role", account, role["metadata"]["uid"])], owners


def _a_pipelines_life(cluster: Cluster, bootstrap: str) -> None:
    """Every kind of call the reconcilers make: a rollout to enabled with an auth Secret
    (task pods, their ConfigMaps and RBAC, fencing), a resize (pods and ConfigMaps
    deleted), both Spark submitters with a restart each, and deletions."""
    topic = f"lp-{uuid.uuid4().hex[:6]}"
    cluster.secret("kafka-auth", {"client.id": "onceflow-test"})
    cluster.create(
        "pipelines", pipeline(bootstrap, "enabled", authSecretRef={"name": "kafka-auth"})
    )
    cluster.create("kafkasources", source(2, topic))
    wait_for(
        lambda: (
            cluster.status("pipelines", "orders").get("exactlyOnce", {}).get("current") == "enabled"
        ),
        180,
        "the rollout to reach enabled",
    )
    cluster.patch_spec("kafkasources", "counter", {"tasksMax": 1})
    wait_for(
        lambda: (
            [p.metadata.name for p in cluster.pods("onceflow.io/source=counter")]
            == [f"counter-g{cluster.status('kafkasources', 'counter').get('generation')}-0"]
        ),
        120,
        "the source resized to one task",
    )
    for submitter in ("spark-submit", "spark-operator"):
        job = _job(partitions=2)
        job["metadata"]["name"] = name = f"agg-{submitter.split('-')[1]}"
        job["spec"] |= {"submitter": submitter, "checkpoint": {"path": f"/tmp/{name}"}}
        cluster.create("sparkjobs", job)
        wait_for(
            lambda name=name: (
                cluster.condition("sparkjobs", name, "Progressing").get("reason") == "Starting"
            ),
            60,
            f"{name}'s driver submitted",
        )
        cluster.patch_spec("sparkjobs", name, {"transform": {"sql": "SELECT value FROM input"}})
        wait_for(
            lambda name=name: any(
                e.reason == "ApplicationSubmitted" for e in cluster.events(name)[1:]
            ),
            60,
            f"{name} resubmitted after the edit",
        )
        cluster.delete("sparkjobs", name)
        # Gone, not just deleted: a job being deleted still owns its sink topic (its
        # driver may still write), so the next job, writing the same topic, would be
        # held until then.
        wait_for(
            lambda name=name: all(
                s["metadata"]["name"] != name
                for s in cluster.custom.list_namespaced_custom_object(
                    "onceflow.io", "v1alpha1", cluster.namespace, "sparkjobs"
                )["items"]
            ),
            120,
            f"{name} to be gone",
        )
    cluster.delete("kafkasources", "counter")
    wait_for(
        lambda: (
            not any(
                s["metadata"]["name"] == "counter"
                for s in cluster.custom.list_namespaced_custom_object(
                    "onceflow.io", "v1alpha1", cluster.namespace, "kafkasources"
                )["items"]
            )
        ),
        120,
        "the source's finalizer to fence and let go",
    )


@contextmanager
def _garbage_collector(cluster: Cluster) -> Iterator[None]:
    """The operator deletes drivers' Jobs in the foreground; with no garbage collector
    on the test bed, a Job being deleted has its finalizer removed here, as the
    collector does once the Job's pods are gone."""
    batch = client.BatchV1Api(cluster.api)
    stop = threading.Event()

    def collect() -> None:
        while not stop.wait(0.5):
            for job in batch.list_namespaced_job(cluster.namespace).items:
                if job.metadata.deletion_timestamp and job.metadata.finalizers:
                    with contextlib.suppress(client.ApiException):
                        batch.patch_namespaced_job(
                            job.metadata.name, cluster.namespace, {"metadata": {"finalizers": None}}
                        )

    collector = threading.Thread(target=collect, daemon=True)
    collector.start()
    try:
        yield
    finally:
        stop.set()
        collector.join()


def test_a_pod_create_rbac_refuses_is_degraded_naming_the_missing_right(
    kubeconfig: str, kafka_bootstrap: str, installed: tuple[str, str, str], tmp_path: Path
) -> None:
    home, watched, account = installed
    role = json.loads(
        kubectl(kubeconfig, "get", "role", account, "-n", watched, "-o", "json").stdout
    )
    for rule in role["rules"]:
        if rule["resources"] == ["pods"]:
            rule["verbs"] = [v for v in rule["verbs"] if v != "create"]
    kubectl(kubeconfig, "replace", "-f", "-", stdin=json.dumps(role))
    as_operator = _token_kubeconfig(kubeconfig, home, account, tmp_path / "operator.kubeconfig")
    operator = OperatorProcess(
        as_operator, watched, tmp_path / "operator.log", extra=("--peering=onceflow",)
    ).start()
    cluster = Cluster(kubeconfig, watched)
    try:
        cluster.create("pipelines", pipeline(kafka_bootstrap, "disabled"))
        cluster.create("kafkasources", source(1, f"lp-{uuid.uuid4().hex[:6]}"))
        wait_for(
            lambda: (
                cluster.condition("kafkasources", "counter", "Degraded").get("reason")
                == "Forbidden"
            ),
            60,
            "the refused pod create in status",
        )
        message = cluster.condition("kafkasources", "counter", "Degraded")["message"]
        assert 'cannot create resource "pods"' in message and "RBAC" in message, message
        wait_for(
            lambda: any(
                e.reason == "Forbidden" and e.type == "Warning" for e in cluster.events("counter")
            ),
            10,
            "the Warning event, which follows the status",
        )
    finally:
        operator.stop()


def _the_webhook_judges_with_these_rights(as_operator: str, watched: str) -> None:
    """The webhook's checks as the operator's account: the topic graph is judged over
    the Pipelines, sources and jobs it can list (the watched namespaces), never
    cluster-wide."""
    kube = KubeClient(load_config(as_operator), (watched,))
    document = {
        "apiVersion": "onceflow.io/v1alpha1",
        "kind": "Pipeline",
        "metadata": {"name": "second", "namespace": watched},
        "spec": {
            "kafka": {"bootstrapServers": "127.0.0.1:9"},
            "transactionalIdPrefix": f"{watched}.lp-2",
        },
    }
    assert review(document, kube.get, kube.list_objects).allowed
    job = _job(partitions=2)
    job["metadata"] |= {"name": "loop", "namespace": watched}
    job["spec"]["sink"]["kafka"]["topic"] = job["spec"]["input"]["topics"][0]
    verdict = review({"apiVersion": "onceflow.io/v1alpha1", **job}, kube.get, kube.list_objects)
    assert not verdict.allowed and "is also this job's input" in verdict.message, verdict
