"""Failures a reconcile pass cannot get past, on a real API server with the operator
running: each reaches the object's status as Degraded with a reason and a message
naming the fix, and a Warning event; the Pipeline reports Degraded while a workload
is; fixing the cause brings the object back without restarting anything."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.integration.test_operator import pipeline, source
from tests.integration.test_operator_spark import _job
from tests.support.cluster import (
    SPARK_CRD_NAME,
    Cluster,
    OperatorProcess,
    install_crds,
    install_spark_crd,
)
from tests.support.kubelet import LocalKubelet
from tests.support.testbed import kubectl
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.k8s, pytest.mark.kafka]


def _degraded(cluster: Cluster, plural: str, name: str, reason: str) -> dict[str, Any]:
    """Waits for Degraded=True with ``reason``; returns the condition."""
    wait_for(
        lambda: (
            cluster.condition(plural, name, "Degraded").get("reason") == reason
            and cluster.condition(plural, name, "Degraded").get("status") == "True"
        ),
        60,
        f"{plural}/{name} Degraded with {reason} (now "
        f"{cluster.condition(plural, name, 'Degraded')})",
    )
    condition = cluster.condition(plural, name, "Degraded")
    assert cluster.condition(plural, name, "Ready").get("status") == "False"
    # The event follows the status write.
    wait_for(
        lambda: any(e.type == "Warning" and e.reason == reason for e in cluster.events(name)),
        10,
        f"a Warning event {reason} on {plural}/{name}",
    )
    return condition


def _ready(cluster: Cluster, plural: str, name: str) -> None:
    wait_for(
        lambda: cluster.condition(plural, name, "Ready").get("status") == "True",
        120,
        f"{plural}/{name} Ready again",
    )
    assert cluster.condition(plural, name, "Degraded").get("status") == "False"


def test_a_missing_or_unsafe_auth_secret_degrades_the_source_and_its_pipeline(
    operator: tuple[Cluster, OperatorProcess, LocalKubelet], kafka_bootstrap: str
) -> None:
    cluster, _, _ = operator
    topic = f"fail-{uuid.uuid4().hex[:6]}"
    cluster.create(
        "pipelines", pipeline(kafka_bootstrap, "disabled", authSecretRef={"name": "kafka-auth"})
    )
    cluster.create("kafkasources", source(1, topic))

    missing = _degraded(cluster, "kafkasources", "counter", "SecretNotFound")
    assert "Secret 'kafka-auth' not found" in missing["message"], missing
    assert "spec.kafka.authSecretRef" in missing["message"], missing
    rolled = _degraded(cluster, "pipelines", "orders", "WorkloadDegraded")
    assert "KafkaSource/counter: SecretNotFound" in rolled["message"], rolled
    assert cluster.pods("onceflow.io/source=counter") == [], "no pod without its Secret"

    # A key that would make the operator's librdkafka load a library is refused, named.
    cluster.secret("kafka-auth", {"client.id": "t", "plugin.library.paths": "/tmp/x.so"})
    refused = _degraded(cluster, "kafkasources", "counter", "KafkaSettingRefused")
    assert "'plugin.library.paths'" in refused["message"], refused
    assert "tenants.kafkaSecretKeys" in refused["message"], refused
    assert cluster.pods("onceflow.io/source=counter") == []

    cluster.secret("kafka-auth", {"client.id": "onceflow-test"})
    _ready(cluster, "kafkasources", "counter")
    _ready(cluster, "pipelines", "orders")


def _refuse_pods(namespace: str) -> list[dict[str, Any]]:
    """A cluster admission policy that refuses every pod of ``namespace`` (403)."""
    name = f"{namespace}-no-pods"
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE"],
                            "resources": ["pods"],
                        }
                    ]
                },
                "validations": [
                    {
                        "expression": "false",
                        "message": "pods are not allowed here by policy",
                        "reason": "Forbidden",
                    }
                ],
            },
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {
                "policyName": name,
                "validationActions": ["Deny"],
                "matchResources": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
                },
            },
        },
    ]


def test_a_pod_create_the_api_refuses_degrades_the_source(
    operator: tuple[Cluster, OperatorProcess, LocalKubelet],
    kafka_bootstrap: str,
    kubeconfig: str,
    tmp_path: Path,
) -> None:
    cluster, _, _ = operator
    policy = tmp_path / "no-pods.yaml"
    policy.write_text(yaml.safe_dump_all(_refuse_pods(cluster.namespace)))
    kubectl(kubeconfig, "apply", "-f", str(policy))
    try:
        cluster.create("pipelines", pipeline(kafka_bootstrap, "disabled"))
        cluster.create("kafkasources", source(1, f"fail-{uuid.uuid4().hex[:6]}"))
        refused = _degraded(cluster, "kafkasources", "counter", "Forbidden")
        assert "pods are not allowed here by policy" in refused["message"], refused
        assert "admission policy" in refused["message"], refused
        _degraded(cluster, "pipelines", "orders", "WorkloadDegraded")
    finally:
        kubectl(kubeconfig, "delete", "-f", str(policy), "--ignore-not-found")
    _ready(cluster, "kafkasources", "counter")


@pytest.mark.alone  # it replaces the Pipeline CRD
def test_an_invalid_pipeline_degrades_itself_and_names_itself_to_its_workloads(
    operator: tuple[Cluster, OperatorProcess, LocalKubelet], kafka_bootstrap: str, kubeconfig: str
) -> None:
    cluster, _, _ = operator
    # A Pipeline stored under an older CRD, which did not bound names (the model, the
    # labels and the ids built from the name take 63 characters at most). The current
    # CRD's rule would refuse even its status, so the older one stays for the test.
    rules = "/spec/versions/0/schema/openAPIV3Schema/x-kubernetes-validations"
    older = [{"op": "remove", "path": rules}]
    kubectl(
        kubeconfig, "patch", "crd/pipelines.onceflow.io", "--type=json", "-p", json.dumps(older)
    )
    try:
        name = "orders-" + "x" * 60
        body = pipeline(kafka_bootstrap, "disabled")
        wait_for(
            lambda: _created(cluster, {**body, "metadata": {"name": name}}),
            30,
            "the older CRD to take a long name",
        )
        workload = source(1, f"fail-{uuid.uuid4().hex[:6]}")
        workload["spec"]["pipeline"] = name
        cluster.create("kafkasources", workload)

        invalid = _degraded(cluster, "pipelines", name, "InvalidSpec")
        assert "metadata.name" in invalid["message"], invalid
        named = _degraded(cluster, "kafkasources", "counter", "PipelineInvalid")
        assert f"Pipeline {name!r} is invalid" in named["message"], named
    finally:
        install_crds(kubeconfig, again=True)


def _created(cluster: Cluster, body: dict[str, Any]) -> bool:
    try:
        cluster.create("pipelines", body)
    except ApiException as refused:
        if refused.status != 422:
            raise
        return False
    return True


@pytest.mark.alone  # it deletes the Spark operator's CRD
def test_a_spark_job_without_the_spark_operator_crd_says_so(
    operator: tuple[Cluster, OperatorProcess, LocalKubelet], kafka_bootstrap: str, kubeconfig: str
) -> None:
    cluster, _, _ = operator
    kubectl(kubeconfig, "delete", SPARK_CRD_NAME, "--ignore-not-found", "--wait=true")
    try:
        cluster.create("pipelines", pipeline(kafka_bootstrap, "disabled"))
        cluster.create("sparkjobs", _job(partitions=2))
        missing = _degraded(cluster, "sparkjobs", "agg", "SparkOperatorMissing")
        assert "spec.submitter: spark-submit" in missing["message"], missing
        _degraded(cluster, "pipelines", "orders", "WorkloadDegraded")
    finally:
        install_spark_crd(kubeconfig, again=True)


def test_progress_past_the_deadline_is_degraded_and_named_on_the_pipeline(
    operator: tuple[Cluster, OperatorProcess, LocalKubelet], kafka_bootstrap: str
) -> None:
    cluster, default, _ = operator
    default.stop()
    impatient = OperatorProcess(
        default.kubeconfig,
        default.namespace,
        default.log,
        environment=(("ONCEFLOW_PROGRESS_DEADLINE_S", "8"),),
    ).start()
    try:
        cluster.create("pipelines", pipeline(kafka_bootstrap, "disabled"))
        # The test bed runs no Job controller: the driver's Job never gets a pod, so the
        # job stays Starting, as one whose image cannot be pulled does.
        job = _job(partitions=2)
        job["spec"] |= {"submitter": "spark-submit", "checkpoint": {"path": "/tmp/agg"}}
        cluster.create("sparkjobs", job)
        late = _degraded(cluster, "sparkjobs", "agg", "ProgressDeadlineExceeded")
        assert "longer than the 8 s deadline" in late["message"], late
        assert cluster.condition("sparkjobs", "agg", "Progressing")["status"] == "True"
        named = _degraded(cluster, "pipelines", "orders", "WorkloadDegraded")
        assert "SparkJob/agg: ProgressDeadlineExceeded" in named["message"], named

        cluster.delete("sparkjobs", "agg")
        _ready(cluster, "pipelines", "orders")
    finally:
        impatient.stop()


def test_a_refused_spark_setting_is_degraded_and_nothing_is_submitted(
    operator: tuple[Cluster, OperatorProcess, LocalKubelet], kafka_bootstrap: str
) -> None:
    cluster, _, _ = operator
    cluster.create("pipelines", pipeline(kafka_bootstrap, "disabled"))
    job = _job(partitions=2)
    volume = "spark.kubernetes.executor.volumes.hostPath.root.mount.path"
    job["spec"] |= {"submitter": "spark-submit", "sparkConf": {volume: "/host"}}
    cluster.create("sparkjobs", job)
    refused = _degraded(cluster, "sparkjobs", "agg", "SettingRefused")
    assert f"spec.sparkConf[{volume!r}]" in refused["message"], refused
    jobs = client.BatchV1Api(cluster.api).list_namespaced_job(cluster.namespace).items
    assert jobs == [], "nothing rendered for a refused setting"


def test_a_mirror_secret_that_would_load_a_library_in_the_operator_is_refused(
    operator: tuple[Cluster, OperatorProcess, LocalKubelet], kafka_bootstrap: str
) -> None:
    cluster, _, _ = operator
    cluster.create("pipelines", pipeline(kafka_bootstrap, "disabled"))
    cluster.secret(
        "source-cluster", {"security.protocol": "plaintext", "ssl.engine.location": "/tmp/x.so"}
    )
    mirror = source(1, f"fail-{uuid.uuid4().hex[:6]}")
    mirror["spec"]["connector"] = {
        "type": "kafka",
        "config": {"bootstrapServers": kafka_bootstrap, "topics": ["anything"]},
        "secretRef": {"name": "source-cluster"},
    }
    mirror["spec"]["exactlyOnceSupport"] = "requested"
    cluster.create("kafkasources", mirror)
    refused = _degraded(cluster, "kafkasources", "counter", "KafkaSettingRefused")
    assert "spec.connector.secretRef: Secret 'source-cluster'" in refused["message"], refused
    assert "'ssl.engine.location'" in refused["message"], refused
    assert cluster.pods("onceflow.io/source=counter") == []


def test_a_second_writer_of_a_running_sources_topic_is_held_and_the_first_runs_on(
    operator: tuple[Cluster, OperatorProcess, LocalKubelet], kafka_bootstrap: str
) -> None:
    """Stored without the webhook (nothing refused it): the newcomer is Degraded naming
    the source it collides with and starts no task; the source stored first keeps its
    topic and its tasks. Moving the newcomer to a topic of its own lets it start."""
    cluster, _, _ = operator
    topic = f"owned-{uuid.uuid4().hex[:6]}"
    cluster.create("pipelines", pipeline(kafka_bootstrap, "disabled"))
    cluster.create("kafkasources", source(1, topic))
    wait_for(lambda: len(cluster.pods("onceflow.io/source=counter")) == 1, 60, "counter's task")
    copycat = source(1, topic)
    copycat["metadata"] = {"name": "copycat"}
    cluster.create("kafkasources", copycat)
    held = _degraded(cluster, "kafkasources", "copycat", "TopicConflict")
    assert (
        f"topic '{topic}' is also the output topic of KafkaSource 'counter'" in (held["message"])
    ), held
    assert cluster.pods("onceflow.io/source=copycat") == [], "no task for the second writer"
    assert cluster.condition("kafkasources", "counter", "Degraded").get("status") != "True"
    assert len(cluster.pods("onceflow.io/source=counter")) == 1, "the owner runs on"
    cluster.patch_spec("kafkasources", "copycat", {"topic": f"{topic}-own"})
    wait_for(lambda: len(cluster.pods("onceflow.io/source=copycat")) == 1, 60, "copycat's own task")


def test_a_job_named_after_objects_it_does_not_own_leaves_them_as_they_are(
    operator: tuple[Cluster, OperatorProcess, LocalKubelet], kafka_bootstrap: str, kubeconfig: str
) -> None:
    """Security review #5: another team's Job `victim-driver`, ConfigMap `victim3-job`
    and SparkApplication `victim2` in the namespace. SparkJobs named `victim`,
    `victim2` and `victim3` once had the operator delete the Job and the
    SparkApplication (a submitter switch) and rewrite the ConfigMap. Now `victim`
    and `victim3`, which need those names, are Degraded (NameTaken); `victim2`, a
    spark-submit job, runs its own Job and leaves the SparkApplication alone; and
    every object stays as it was."""
    cluster, _, _ = operator
    install_spark_crd(kubeconfig)  # the other team's SparkApplication needs its kind
    batch = client.BatchV1Api(cluster.api)
    theirs = {"team": "payments"}
    batch.create_namespaced_job(
        cluster.namespace,
        {
            "metadata": {"name": "victim-driver", "labels": theirs},
            "spec": {
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "report", "image": "example/report:1"}],
                    }
                }
            },
        },
    )
    cluster.core.create_namespaced_config_map(
        cluster.namespace,
        {"metadata": {"name": "victim3-job", "labels": theirs}, "data": {"report": "keep"}},
    )
    application = {
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "SparkApplication",
        "metadata": {"name": "victim2", "labels": theirs},
        "spec": {
            "type": "Scala",
            "mode": "cluster",
            "image": "example/spark:1",
            "mainClass": "Report",
            "mainApplicationFile": "local:///report.jar",
            "sparkVersion": "4.0.0",
            "driver": {},
            "executor": {},
        },
    }
    cluster.custom.create_namespaced_custom_object(
        "sparkoperator.k8s.io", "v1beta2", cluster.namespace, "sparkapplications", application
    )
    cluster.create("pipelines", pipeline(kafka_bootstrap, "disabled"))
    for name, submitter in (("victim", "spark-submit"), ("victim2", "spark-submit")):
        job = _job(partitions=2)
        job["metadata"]["name"] = name
        job["spec"] |= {"submitter": submitter, "checkpoint": {"path": f"/tmp/{name}"}}
        job["spec"]["sink"]["kafka"]["topic"] = f"{name}.out"
        cluster.create("sparkjobs", job)
    job = _job(partitions=2)
    job["metadata"]["name"] = "victim3"
    job["spec"] |= {"checkpoint": {"path": "/tmp/victim3"}}
    job["spec"]["sink"]["kafka"]["topic"] = "victim3.out"
    cluster.create("sparkjobs", job)

    for name, kind, other in (
        ("victim", "Job", "victim-driver"),
        ("victim3", "ConfigMap", "victim3-job"),
    ):
        taken = _degraded(cluster, "sparkjobs", name, "NameTaken")
        assert f"a {kind} {other!r} exists in this namespace" in taken["message"], taken
    wait_for(
        lambda: any(
            j.metadata.name == "victim2-driver"
            for j in batch.list_namespaced_job(cluster.namespace).items
        ),
        30,
        "victim2's own spark-submit Job",
    )
    assert cluster.condition("sparkjobs", "victim2", "Degraded").get("status") != "True"
    kept = batch.read_namespaced_job("victim-driver", cluster.namespace)
    assert kept.metadata.deletion_timestamp is None and kept.metadata.labels == theirs
    assert cluster.core.read_namespaced_config_map("victim3-job", cluster.namespace).data == {
        "report": "keep"
    }
    still = cluster.custom.get_namespaced_custom_object(
        "sparkoperator.k8s.io", "v1beta2", cluster.namespace, "sparkapplications", "victim2"
    )
    assert still["metadata"]["labels"] == theirs and "deletionTimestamp" not in still["metadata"]


def test_a_prefix_outside_the_namespace_is_kept_from_before_the_upgrade_and_refused_when_new(
    operator: tuple[Cluster, OperatorProcess, LocalKubelet], kafka_bootstrap: str
) -> None:
    """Security review #6 tied prefixes to namespaces. A Pipeline an operator from
    before ran with another prefix (its status has no acceptedTransactionalIdPrefix)
    keeps it, so an upgrade stops no running pipeline; a new one is refused, and so is
    one the new operator has already refused (its status says "")."""
    cluster, default, _ = operator
    default.stop()
    legacy = pipeline(kafka_bootstrap, "disabled")
    legacy["spec"]["transactionalIdPrefix"] = "orders-eu"
    cluster.create("pipelines", legacy)
    cluster.custom.patch_namespaced_custom_object_status(
        "onceflow.io",
        "v1alpha1",
        cluster.namespace,
        "pipelines",
        "orders",
        {"status": {"observedGeneration": 1, "exactlyOnce": {"current": "disabled"}}},
    )
    restarted = OperatorProcess(default.kubeconfig, default.namespace, default.log).start()
    try:
        wait_for(
            lambda: (
                cluster.status("pipelines", "orders").get("acceptedTransactionalIdPrefix")
                == "orders-eu"
            ),
            30,
            "the legacy prefix kept",
        )
        _ready(cluster, "pipelines", "orders")
        squat = pipeline(kafka_bootstrap, "disabled")
        squat["metadata"]["name"] = "squat"
        squat["spec"]["transactionalIdPrefix"] = "payments.orders"
        cluster.create("pipelines", squat)
        refused = _degraded(cluster, "pipelines", "squat", "PrefixRefused")
        assert "'payments.orders' does not start with this namespace's name" in refused["message"]
        assert cluster.status("pipelines", "squat").get("acceptedTransactionalIdPrefix") == ""
    finally:
        restarted.stop()
