"""The generated CRDs on a real API server: established, explained, and rejecting
invalid resources with messages that name the field, without any operator running."""

from __future__ import annotations

import functools
from typing import Any

import pytest
import yaml

from onceflow.api import parse_resources
from onceflow.render import render_resources
from tests.support.cluster import new_namespace
from tests.support.testbed import ROOT, kubectl
from tests.support.waiting import wait_for

pytestmark = pytest.mark.k8s
kubectl_unchecked = functools.partial(kubectl, check=False)


@pytest.fixture(scope="module")
def crds(kubeconfig: str) -> str:
    applied = kubectl_unchecked(kubeconfig, "apply", "--server-side", "-f", str(ROOT / "crds"))
    assert applied.returncode == 0, applied.stderr
    for plural in ("pipelines", "kafkasources", "sparkjobs"):
        waited = kubectl_unchecked(
            kubeconfig,
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            f"crd/{plural}.onceflow.io",
        )
        assert waited.returncode == 0, waited.stderr
    return kubeconfig


def test_kubectl_explain_teaches_the_fields(crds: str) -> None:
    # The OpenAPI document is republished a few seconds after a CRD is established.
    wait_for(
        lambda: kubectl_unchecked(crds, "explain", "kafkasource.spec").returncode == 0,
        60,
        "the KafkaSource schema in the published OpenAPI",
    )
    explained = kubectl_unchecked(crds, "explain", "kafkasource.spec.transactionBoundary")
    assert explained.returncode == 0, explained.stderr
    assert "one transaction per poll() batch" in explained.stdout
    assert "onceflow" in kubectl_unchecked(crds, "api-resources", "--categories=onceflow").stdout


SOURCE: dict[str, Any] = {
    "apiVersion": "onceflow.io/v1alpha1",
    "kind": "KafkaSource",
    "metadata": {"name": "orders", "namespace": "default"},
    "spec": {"pipeline": "p", "topic": "t", "connector": {"type": "sequence"}},
}
JOB: dict[str, Any] = {
    "apiVersion": "onceflow.io/v1alpha1",
    "kind": "SparkJob",
    "metadata": {"name": "agg", "namespace": "default"},
    "spec": {
        "pipeline": "p",
        "input": {"topics": ["t"]},
        "transform": {"sql": "SELECT * FROM input"},
        "sink": {"kafka": {"topic": "out", "partitions": 3}},
        "checkpoint": {"path": "/tmp/ck"},
    },
}
PIPELINE: dict[str, Any] = {
    "apiVersion": "onceflow.io/v1alpha1",
    "kind": "Pipeline",
    "metadata": {"name": "p", "namespace": "default"},
    "spec": {"kafka": {"bootstrapServers": "127.0.0.1:9092"}, "exactlyOnce": "enabled"},
}


def _with(base: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    document = yaml.safe_load(yaml.safe_dump(base))
    *parents, leaf = path.split(".")
    node = document
    for key in parents:
        node = node.setdefault(key, {})
    if value is None:
        node.pop(leaf, None)
    else:
        node[leaf] = value
    return document


def test_valid_resources_pass_server_side_dry_run(crds: str) -> None:
    for document in (PIPELINE, SOURCE, JOB):
        result = kubectl_unchecked(
            crds, "apply", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump(document)
        )
        assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("document", "field"),
    [
        (_with(SOURCE, "spec.transactionBoundary", "sometimes"), "spec.transactionBoundary"),
        (_with(SOURCE, "spec.exactlyOnceSupport", "maybe"), "spec.exactlyOnceSupport"),
        (_with(SOURCE, "spec.tasksMax", -2), "spec.tasksMax"),
        (
            _with(SOURCE, "spec.transactionBoundaryIntervalMs", 100),
            "spec.transactionBoundaryIntervalMs",
        ),
        (
            _with(
                _with(
                    _with(SOURCE, "spec.transactionBoundary", "interval"),
                    "spec.transactionTimeoutMs",
                    60000,
                ),
                "spec.transactionBoundaryIntervalMs",
                40000,  # more than half the transaction timeout
            ),
            "spec.transactionBoundaryIntervalMs",
        ),
        (_with(SOURCE, "spec.topic", None), "spec.topic"),
        (
            _with(SOURCE, "spec.volumes", [{"name": "data", "mountPath": "/data"}]),
            "spec.volumes[0].persistentVolumeClaim",
        ),
        (
            _with(
                SOURCE,
                "spec.volumes",
                [{"name": "tmp", "mountPath": "/d", "persistentVolumeClaim": {"claimName": "c"}}],
            ),
            "the task pod uses that name",
        ),
        (_with(SOURCE, "spec.connector.type", ""), "spec.connector.type"),
        (_with(SOURCE, "metadata.name", "s" * 64), "metadata.name: at most 63 characters"),
        (_with(PIPELINE, "metadata.name", "p" * 64), "metadata.name: at most 63 characters"),
        (
            _with(JOB, "metadata.name", "j" * 57),
            "metadata.name: at most 56 characters, as its driver is named <name>-driver",
        ),
        (_with(PIPELINE, "spec.exactlyOnce", "always"), "spec.exactlyOnce"),
        (_with(PIPELINE, "spec.kafka", None), "spec.kafka"),
        (_with(JOB, "spec.sink.files", {"path": "/out"}), "spec.sink"),
        (_with(JOB, "spec.input.sources", ["s"]), "spec.input"),
        (_with(JOB, "spec.sink.kafka.partitions", 0), "spec.sink.kafka.partitions"),
        (_with(JOB, "spec.executor.instances", 1001), "spec.executor.instances"),
        (_with(JOB, "spec.input.topics", [f"t{i}" for i in range(101)]), "spec.input.topics"),
        (
            _with(JOB, "spec.sparkConf", {f"spark.k{i}": "v" for i in range(201)}),
            "spec.sparkConf",
        ),
        (
            _with(SOURCE, "spec.connector.config", {f"k{i}": i for i in range(101)}),
            "spec.connector.config",
        ),
        (_with(JOB, "spec.trigger", {"processingTime": "soon"}), "spec.trigger.processingTime"),
        (
            _with(JOB, "spec.sparkConf", {"spark.kubernetes.executor.request.cores": "lots"}),
            "sparkConf['spark.kubernetes.executor.request.cores'] must be a CPU quantity",
        ),
        (
            _with(JOB, "spec.env", [{"name": "SPARK_HOME", "value": "/"}]),
            "are set by the image, Spark",
        ),
        (_with(JOB, "spec.env", [{"name": "A"}]), "set exactly one of value or valueFrom"),
        (
            _with(JOB, "spec.env", [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]),
            'spec.env[1]: Duplicate value: {"name":"A"}',
        ),
        (_with(JOB, "spec.outputMode", "complete"), "complete rewrites the whole result table"),
        (_with(JOB, "spec.outputMode", "sometimes"), "spec.outputMode"),
        (
            _with(
                _with(JOB, "spec.sink", {"postgres": {"table": "t", "secretRef": {"name": "d"}}}),
                "spec.outputMode",
                "update",
            ),
            "without spec.sink.postgres.key",
        ),
        (
            _with(JOB, "spec.trigger", {"availableNow": True, "processingTime": "1s"}),
            "set processingTime or availableNow, not both",
        ),
        (
            _with(JOB, "spec.transform", {"sql": "SELECT 1", "configMap": "code"}),
            "configMap holds Python files",
        ),
        (_with(JOB, "spec.dedup", {"columns": ["key"]}), "spec.dedup: needs spec.watermark"),
        (
            _with(
                _with(JOB, "spec.dedup", {"columns": ["key", "Offset"]}),
                "spec.watermark",
                {"column": "ts", "delay": "1m"},
            ),
            "differ between deliveries of one record",
        ),
        (
            _with(
                _with(JOB, "spec.dedup", {"columns": ["key"]}),
                "spec.watermark",
                {"column": "timestamp", "delay": "1m"},
            ),
            "spec.watermark.column: with spec.dedup the event time must come from the record",
        ),
    ],
)
def test_invalid_resources_are_rejected_naming_the_field(
    crds: str, document: dict[str, Any], field: str
) -> None:
    result = kubectl_unchecked(
        crds, "apply", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump(document)
    )
    assert result.returncode != 0, f"accepted: {document}"
    assert field in result.stderr, result.stderr


def test_task_pods_are_admitted_where_pod_security_restricted_is_enforced(
    kubeconfig: str,
) -> None:
    """The API server's own Pod Security admission judges the rendered task pods (a
    server-side dry run: nothing runs)."""
    namespace = new_namespace(kubeconfig, "restricted")
    kubectl(
        kubeconfig,
        "label",
        "namespace",
        namespace,
        "pod-security.kubernetes.io/enforce=restricted",
    )
    documents = list(yaml.safe_load_all((ROOT / "examples" / "quickstart.yaml").read_text()))
    for document in documents:
        if document:
            document["metadata"]["namespace"] = namespace
    objects = render_resources(parse_resources(documents))
    (account,) = [o for o in objects if o["kind"] == "ServiceAccount"]
    kubectl(kubeconfig, "create", "-f", "-", stdin=yaml.safe_dump(account))
    pods = [o for o in objects if o["kind"] == "Pod"]
    assert pods
    for pod in pods:
        result = kubectl_unchecked(
            kubeconfig, "create", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump(pod)
        )
        assert result.returncode == 0, result.stderr
        assert "violate PodSecurity" not in result.stderr
    for pod in _spark_pods(namespace):
        result = kubectl_unchecked(
            kubeconfig, "create", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump(pod)
        )
        assert result.returncode == 0, f"{pod['metadata']['name']}: {result.stderr}"
    bare = {**pods[0], "spec": {**pods[0]["spec"], "securityContext": {}}}
    refused = kubectl_unchecked(
        kubeconfig, "create", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump(bare)
    )
    assert refused.returncode != 0 and "PodSecurity" in refused.stderr, "enforcement is on"


def _spark_pods(namespace: str) -> list[dict[str, Any]]:
    """The pods Spark jobs would run: the spark-submit Job's driver pod, and an executor
    pod as Spark builds it from the template in the job's ConfigMap."""
    documents = list(yaml.safe_load_all((ROOT / "examples" / "orders-pipeline.yaml").read_text()))
    for document in documents:
        if document:
            document["metadata"]["namespace"] = namespace
            if document["kind"] == "SparkJob":
                document["spec"]["submitter"] = "spark-submit"
    objects = render_resources(parse_resources(documents))
    (job,) = [o for o in objects if o["kind"] == "Job"]
    (configmap,) = [o for o in objects if o["kind"] == "ConfigMap" and "job.json" in o["data"]]
    driver = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "driver", "namespace": namespace},
        "spec": {**job["spec"]["template"]["spec"], "serviceAccountName": "default"},
    }
    executor = yaml.safe_load(configmap["data"]["executor-pod.json"])
    executor["metadata"] = {"name": "executor", "namespace": namespace}
    executor["spec"]["containers"][0]["image"] = "onceflow"
    return [driver, executor]
