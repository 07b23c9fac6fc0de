"""SparkJobs on a real API server with the Spark operator's real CRD installed: the
rendered SparkApplication is accepted, carries the isolation level, checkpoint and
restart policy; the job reports its mode to the rollout; re-partitioning the sink
fences the old sink ids before a new application exists."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from onceflow.model.spark_names import sink_transactional_id
from tests.support.cluster import Cluster, OperatorProcess, install_spark_crd, running_operator
from tests.support.kafka import zombie_in_a_transaction
from tests.support.kubelet import LocalKubelet
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.k8s, pytest.mark.kafka]


@pytest.fixture
def operator(
    kubeconfig: str, kafka_bootstrap: str, tmp_path: Path
) -> Iterator[tuple[Cluster, OperatorProcess, LocalKubelet]]:
    install_spark_crd(kubeconfig)
    with running_operator(kubeconfig, tmp_path, "spk") as running:
        yield running


def _job(partitions: int) -> dict[str, Any]:
    return {
        "kind": "SparkJob",
        "metadata": {"name": "agg"},
        "spec": {
            "pipeline": "orders",
            "input": {"topics": ["orders.raw"]},
            "transform": {"sql": "SELECT key, value FROM input"},
            "sink": {"kafka": {"topic": "orders.out", "partitions": partitions}},
            "checkpoint": {"pvc": "agg-checkpoint"},
        },
    }


def _pipeline(cluster: Cluster, bootstrap: str, mode: str, **kafka: Any) -> None:
    cluster.create(
        "pipelines",
        {
            "kind": "Pipeline",
            "metadata": {"name": "orders"},
            "spec": {"kafka": {"bootstrapServers": bootstrap, **kafka}, "exactlyOnce": mode},
        },
    )


def _enabled(cluster: Cluster) -> None:
    """The job of a new Pipeline declared enabled runs enabled from the start (nothing
    ran before it to walk up from), the test answering for the Spark operator."""
    wait_for(lambda: _running_in(cluster, "enabled"), 60, "the job to report enabled")


def _application(cluster: Cluster) -> dict[str, Any] | None:
    items = cluster.custom.list_namespaced_custom_object(
        "sparkoperator.k8s.io", "v1beta2", cluster.namespace, "sparkapplications"
    )["items"]
    return items[0] if items else None


def _report_state(cluster: Cluster, state: str) -> None:
    """What the Spark operator would report of the driver (RUNNING, COMPLETED, ...)."""
    cluster.custom.patch_namespaced_custom_object_status(
        "sparkoperator.k8s.io",
        "v1beta2",
        cluster.namespace,
        "sparkapplications",
        "agg",
        {"status": {"applicationState": {"state": state}, "driverInfo": {}}},
    )


def _running_in(cluster: Cluster, mode: str) -> bool:
    """Reports whichever application exists as running, as the Spark operator keeps
    doing for every application (a replaced one starts without a state), and says
    whether the job has observed ``mode``."""
    app = _application(cluster) or {}
    state = (app.get("status") or {}).get("applicationState", {}).get("state")
    labels = app.get("metadata", {}).get("labels", {})
    if state != "RUNNING" and labels.get("onceflow.io/mode") == mode:
        try:
            _report_state(cluster, "RUNNING")
        except ApiException as error:
            if error.status != 404:  # replaced in between: the next poll sees the new one
                raise
    return cluster.status("sparkjobs", "agg").get("observedMode") == mode


def test_spark_job_is_submitted_gates_the_rollout_and_fences_on_repartition(
    operator: tuple[Cluster, OperatorProcess, LocalKubelet], kafka_bootstrap: str
) -> None:
    cluster, _, _ = operator
    # A pipeline that runs at-least-once, then declared enabled: the walk is gated.
    _pipeline(cluster, kafka_bootstrap, "disabled")
    job = _job(2)
    secret_env = {
        "name": "AWS_ACCESS_KEY_ID",
        "valueFrom": {"secretKeyRef": {"name": "s3", "key": "id"}},
    }
    job["spec"]["env"] = [secret_env]
    cluster.create("sparkjobs", job)
    wait_for(lambda: _application(cluster) is not None, 30, "the SparkApplication")
    app = _application(cluster)
    assert app is not None
    # What the Spark operator's CRD keeps is what its webhook and submission can apply.
    assert app["spec"]["driver"]["env"] == [secret_env]
    (executor,) = app["spec"]["executor"]["template"]["spec"]["containers"]
    assert executor["env"] == [secret_env]
    conf = app["spec"]["sparkConf"]
    assert conf["spark.onceflow.kafka.isolation.level"] == "read_uncommitted", (
        "the rollout is at disabled: consumers read uncommitted until preparing"
    )
    assert app["spec"]["restartPolicy"]["type"] == "Always"
    assert app["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == "agg-checkpoint"

    # The rollout waits for the job in each mode; the job follows it to enabled.
    for mode in ("disabled", "preparing", "enabled"):
        wait_for(
            lambda mode=mode: (
                (_application(cluster) or {})
                .get("metadata", {})
                .get("labels", {})
                .get("onceflow.io/mode")
                == mode
            ),
            30,
            f"the application rendered for {mode}",
        )
        wait_for(lambda mode=mode: _running_in(cluster, mode), 60, f"the job to report {mode}")
        if mode == "disabled":
            cluster.patch_spec("pipelines", "orders", {"exactlyOnce": "enabled"})
    wait_for(
        lambda: cluster.condition("pipelines", "orders", "Ready").get("status") == "True",
        30,
        "the pipeline Ready in enabled",
    )
    app = _application(cluster)
    assert app is not None
    assert app["spec"]["sparkConf"]["spark.onceflow.kafka.isolation.level"] == "read_committed"

    prefix = f"{cluster.namespace}.orders"
    zombie = zombie_in_a_transaction(
        kafka_bootstrap, sink_transactional_id(prefix, "agg", 1), "orders.out"
    )
    old_uid = app["metadata"]["uid"]

    cluster.patch_spec("sparkjobs", "agg", {"sink": {"kafka": {"partitions": 3}}})
    wait_for(
        lambda: (_application(cluster) or {}).get("metadata", {}).get("uid") not in (None, old_uid),
        60,
        "a new SparkApplication after re-partitioning",
    )

    # The operator posts ApplicationSubmitted just after creating the application: the
    # new uid can be seen a moment before it (ci19 read the events in between).
    def submitted_after_fencing() -> bool:
        reasons = [e.reason for e in cluster.events("agg")]
        return "SinkFenced" in reasons and reasons.index("SinkFenced") < len(reasons) - 1 - reasons[
            ::-1
        ].index("ApplicationSubmitted")

    wait_for(submitted_after_fencing, 30, "the sink fenced before the new submission")
    with pytest.raises(KafkaException):
        zombie.commit_transaction(30)
    assert cluster.status("sparkjobs", "agg")["sinkPartitions"] == 3


def test_a_handover_whose_fencing_fails_keeps_the_job_stopped_with_its_backoff_in_status(
    operator: tuple[Cluster, OperatorProcess, LocalKubelet], kafka_bootstrap: str
) -> None:
    cluster, _, _ = operator
    cluster.secret("kafka-auth", {"client.id": "onceflow-test"})
    _pipeline(cluster, kafka_bootstrap, "enabled", authSecretRef={"name": "kafka-auth"})
    cluster.create("sparkjobs", _job(2))
    _enabled(cluster)
    # The broker speaks plaintext: a TLS client cannot fence.
    cluster.secret("kafka-auth", {"security.protocol": "ssl"})
    cluster.patch_spec("sparkjobs", "agg", {"sink": {"kafka": {"partitions": 3}}})

    def failures() -> int:
        return int(cluster.status("sparkjobs", "agg").get("fenceFailures") or 0)

    wait_for(lambda: failures() >= 2, 120, "the sink's fencing to fail twice")
    degraded = cluster.condition("sparkjobs", "agg", "Degraded")
    assert degraded["reason"] == "FencingFailed", degraded
    assert "stays stopped until fencing succeeds" in degraded["message"], degraded
    assert cluster.status("sparkjobs", "agg")["fenceRetryAt"].endswith("Z")
    assert _application(cluster) is None, "no driver runs while the old ids are unfenced"

    cluster.secret("kafka-auth", {"client.id": "onceflow-test"})
    wait_for(lambda: _application(cluster) is not None, 120, "the application after fencing")
    status = cluster.status("sparkjobs", "agg")
    assert status["sinkPartitions"] == 3 and "fenceFailures" not in status, status


def test_a_renamed_prefix_fences_the_old_sink_ids_and_tells_the_driver(
    operator: tuple[Cluster, OperatorProcess, LocalKubelet], kafka_bootstrap: str
) -> None:
    """The Pipeline's transactionalIdPrefix changes under a running job: the old
    application is replaced only after the sink ids under the old prefix are fenced,
    and the new driver is told the old prefix (to finish a batch left in flight)."""
    cluster, _, _ = operator
    _pipeline(cluster, kafka_bootstrap, "enabled")
    cluster.create("sparkjobs", _job(2))
    wait_for(lambda: _application(cluster) is not None, 30, "the first SparkApplication")
    old_prefix = f"{cluster.namespace}.orders"
    wait_for(
        lambda: cluster.status("sparkjobs", "agg").get("sinkTransactionalIdPrefix") == old_prefix,
        30,
        "the sink prefix in use recorded",
    )
    zombie = zombie_in_a_transaction(
        kafka_bootstrap, sink_transactional_id(old_prefix, "agg", 0), "orders.out"
    )
    old_uid = _application(cluster)["metadata"]["uid"]  # type: ignore[index]

    renamed = f"{cluster.namespace}.orders-v2"
    cluster.patch_spec("pipelines", "orders", {"transactionalIdPrefix": renamed})
    wait_for(
        lambda: (_application(cluster) or {}).get("metadata", {}).get("uid") not in (None, old_uid),
        60,
        "a new SparkApplication after the rename",
    )
    with pytest.raises(KafkaException):
        zombie.commit_transaction(30)
    status = cluster.status("sparkjobs", "agg")
    assert status["sinkTransactionalIdPrefix"] == renamed
    assert status["previousSinkTransactionalIdPrefix"] == old_prefix
    settings = json.loads(
        cluster.core.read_namespaced_config_map("agg-job", cluster.namespace).data["job.json"]
    )
    assert settings["transactionalIdPrefix"] == renamed
    assert settings["previousTransactionalIdPrefix"] == old_prefix


def test_a_rename_right_after_an_upgrade_still_fences_the_prefix_the_driver_used(
    operator: tuple[Cluster, OperatorProcess, LocalKubelet], kafka_bootstrap: str
) -> None:
    """A status written before prefixes were recorded (only sinkPartitions), and the
    prefix renamed while no operator ran: the old prefix is the one the running driver
    was told (its ConfigMap), and its ids are fenced before the new driver starts."""
    cluster, first, _ = operator
    _pipeline(cluster, kafka_bootstrap, "enabled")
    cluster.create("sparkjobs", _job(2))
    old_prefix = f"{cluster.namespace}.orders"
    wait_for(
        lambda: cluster.status("sparkjobs", "agg").get("sinkTransactionalIdPrefix") == old_prefix,
        30,
        "the sink prefix in use recorded",
    )
    # The prefix is recorded before the driver's ConfigMap is written, and the
    # ConfigMap is what says which prefix a legacy status's driver was told: killed in
    # between (ci19, under load), no driver had been told anything.
    wait_for(lambda: _application(cluster) is not None, 30, "the driver submitted")
    first.kill()
    legacy = {
        k: v
        for k, v in cluster.status("sparkjobs", "agg").items()
        if k not in ("sinkTransactionalIdPrefix", "previousSinkTransactionalIdPrefix")
    }
    cluster.custom.replace_namespaced_custom_object_status(
        "onceflow.io",
        "v1alpha1",
        cluster.namespace,
        "sparkjobs",
        "agg",
        {**cluster.get("sparkjobs", "agg"), "status": legacy},
    )
    zombie = zombie_in_a_transaction(
        kafka_bootstrap, sink_transactional_id(old_prefix, "agg", 1), "orders.out"
    )
    cluster.patch_spec(
        "pipelines", "orders", {"transactionalIdPrefix": f"{cluster.namespace}.orders-v3"}
    )

    second = OperatorProcess(first.kubeconfig, first.namespace, first.log).start()
    try:
        try:
            wait_for(
                lambda: (
                    cluster.status("sparkjobs", "agg").get("previousSinkTransactionalIdPrefix")
                    == old_prefix
                ),
                # Once longer than 60 s in a loaded CI-like run (ci12): the status says why.
                120,
                "the rename handed over from the prefix the driver used",
            )
        except AssertionError as failure:
            status = cluster.status("sparkjobs", "agg")
            raise AssertionError(f"{failure}; status {status}") from None
        with pytest.raises(KafkaException):
            zombie.commit_transaction(30)
    finally:
        second.stop()


def test_spark_submit_job_is_accepted_and_its_running_driver_reports_the_mode(
    operator: tuple[Cluster, OperatorProcess, LocalKubelet], kafka_bootstrap: str
) -> None:
    """No Job controller runs here: the test reports the driver pod ready, as the Job
    controller would, and the job's observed mode follows."""
    cluster, _, _ = operator
    _pipeline(cluster, kafka_bootstrap, "disabled")
    job = _job(2)
    job["spec"]["submitter"] = "spark-submit"
    cluster.create("sparkjobs", job)
    batch = client.BatchV1Api(cluster.api)

    def driver_job() -> Any:
        found = batch.list_namespaced_job(cluster.namespace).items
        return found[0] if found else None

    wait_for(lambda: driver_job() is not None, 30, "the spark-submit Job")
    submitted = driver_job()
    assert submitted.metadata.name == "agg-driver"
    assert submitted.metadata.owner_references[0].kind == "SparkJob"
    container = submitted.spec.template.spec.containers[0]
    assert container.command[:2] == ["/bin/sh", "-c"]
    assert "exec spark-submit --master" in container.command[2]
    assert "spark.onceflow.kafka.isolation.level=read_uncommitted" in container.args
    assert _application(cluster) is None, "no SparkApplication for a spark-submit job"
    assert cluster.status("sparkjobs", "agg").get("observedMode") is None

    batch.patch_namespaced_job_status(
        "agg-driver",
        cluster.namespace,
        {"status": {"active": 1, "ready": 1, "startTime": "2026-01-01T00:00:00Z"}},
    )
    wait_for(
        lambda: cluster.condition("sparkjobs", "agg", "Ready").get("status") == "True",
        30,
        "the job Ready once its driver pod is",
    )
    assert cluster.status("sparkjobs", "agg")["observedMode"] == "disabled"
    assert cluster.status("sparkjobs", "agg")["applicationState"] == "RUNNING"


def test_a_replaced_driver_counts_as_gone_only_when_its_pods_are(
    operator: tuple[Cluster, OperatorProcess, LocalKubelet], kafka_bootstrap: str
) -> None:
    """disabled -> preparing restarts the job reading committed. The old driver pod takes
    its grace period to stop (it ignores SIGTERM here): while it exists no new
    application may exist, or a read_uncommitted consumer would overlap its successor."""
    cluster, _, _ = operator
    _pipeline(cluster, kafka_bootstrap, "disabled")
    cluster.create("sparkjobs", _job(2))
    wait_for(lambda: _application(cluster) is not None, 30, "the SparkApplication")
    first_uid = (_application(cluster) or {})["metadata"]["uid"]
    cluster.core.create_namespaced_pod(
        cluster.namespace,
        {
            "metadata": {
                "name": "agg-driver",
                "labels": {"onceflow.io/sparkjob": "agg", "spark-role": "driver"},
            },
            "spec": {
                "terminationGracePeriodSeconds": 6,
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "spark-kubernetes-driver",
                        "image": "spark",
                        "command": ["sh", "-c", "trap '' TERM; sleep 600"],
                    }
                ],
            },
        },
    )
    _report_state(cluster, "RUNNING")
    wait_for(
        lambda: cluster.status("sparkjobs", "agg").get("observedMode") == "disabled",
        30,
        "the job to report disabled",
    )
    cluster.patch_spec("pipelines", "orders", {"exactlyOnce": "preparing"})

    overlaps: list[str] = []

    def driver_gone() -> bool:
        pods = cluster.pods("onceflow.io/sparkjob=agg")
        application = _application(cluster)
        if pods and application is not None and application["metadata"]["uid"] != first_uid:
            overlaps.append(application["metadata"]["uid"])
        return not pods

    wait_for(driver_gone, 60, "the old driver pod to be deleted and gone")
    assert not overlaps, "a new application existed while the old driver pod did"
    wait_for(
        lambda: (
            (_application(cluster) or {}).get("metadata", {}).get("uid") not in (None, first_uid)
        ),
        30,
        "the application for preparing, once the old driver is gone",
    )


def _application_named(cluster: Cluster, name: str) -> dict[str, Any] | None:
    try:
        return cluster.custom.get_namespaced_custom_object(
            "sparkoperator.k8s.io", "v1beta2", cluster.namespace, "sparkapplications", name
        )
    except ApiException as error:
        if error.status == 404:
            return None
        raise


def test_a_job_renamed_onto_its_checkpoint_starts_only_when_the_old_drivers_pods_are_gone(
    operator: tuple[Cluster, OperatorProcess, LocalKubelet], kafka_bootstrap: str
) -> None:
    """A rename is a new SparkJob on the old one's checkpoint. While the old job is
    stored, the new one is held (CheckpointConflict): two queries on one checkpoint
    overwrite each other's logs. Once it is deleted, its driver pod (which ignores
    SIGTERM here, as a driver finishing a batch does) still works on the checkpoint:
    no application of the new job may exist until that pod is gone, or the batch in
    flight could be written under both names."""
    cluster, _, _ = operator
    _pipeline(cluster, kafka_bootstrap, "enabled")
    cluster.create("sparkjobs", _job(2))
    wait_for(lambda: _application_named(cluster, "agg") is not None, 30, "agg's application")
    labels = (_application_named(cluster, "agg") or {})["spec"]["driver"]["labels"]
    assert labels["onceflow.io/checkpoint"], "driver pods carry their checkpoint's label"
    cluster.core.create_namespaced_pod(
        cluster.namespace,
        {
            "metadata": {"name": "agg-driver", "labels": {**labels, "spark-role": "driver"}},
            "spec": {
                "terminationGracePeriodSeconds": 8,
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "spark-kubernetes-driver",
                        "image": "spark",
                        "command": ["sh", "-c", "trap '' TERM; sleep 600"],
                    }
                ],
            },
        },
    )
    renamed = _job(2)
    renamed["metadata"]["name"] = "agg-v2"
    renamed["spec"]["sink"]["kafka"]["topic"] = "orders.out-v2"
    cluster.create("sparkjobs", renamed)
    degraded = cluster.wait_for_reason(
        "sparkjobs", "agg-v2", "Degraded", "CheckpointConflict", 30,
        "the renamed job held while the old one is stored",
    )["message"]  # fmt: skip
    assert "checkpoint 'agg-checkpoint' is also that of SparkJob 'agg'" in degraded, degraded
    assert _application_named(cluster, "agg-v2") is None

    cluster.delete("sparkjobs", "agg")
    overlaps: list[str] = []

    def old_driver_gone() -> bool:
        pods = cluster.pods("onceflow.io/sparkjob=agg")
        if pods and _application_named(cluster, "agg-v2") is not None:
            overlaps.append("agg-v2")
        return not pods

    wait_for(
        lambda: (
            "on this checkpoint"
            in cluster.condition("sparkjobs", "agg-v2", "Ready").get("message", "")
        ),
        30,
        "the renamed job to wait for the old driver's pod",
    )
    wait_for(old_driver_gone, 60, "the old job's driver pod to be deleted and gone")
    assert not overlaps, "the renamed job's application existed while the old driver ran"
    wait_for(
        lambda: _application_named(cluster, "agg-v2") is not None,
        30,
        "the renamed job's application once the old driver is gone",
    )


def test_an_available_now_job_with_configmap_code_completes_and_shows_its_progress(
    operator: tuple[Cluster, OperatorProcess, LocalKubelet], kafka_bootstrap: str
) -> None:
    """The transform's ConfigMap is missing: the job is Degraded naming it and nothing
    is submitted; once it exists the driver mounts it. A drained availableNow run is
    Ready as Completed, and the progress its driver pod announces reaches the status."""
    cluster, _, _ = operator
    _pipeline(cluster, kafka_bootstrap, "disabled")
    job = _job(2)
    job["spec"]["transform"] = {"module": "shape", "configMap": "shape-code"}
    job["spec"]["trigger"] = {"availableNow": True}
    cluster.create("sparkjobs", job)
    cluster.wait_for_reason(
        "sparkjobs", "agg", "Degraded", "TransformCodeNotFound", 30,
        "the job Degraded for its missing ConfigMap",
    )  # fmt: skip
    assert (
        "no ConfigMap 'shape-code'" in cluster.condition("sparkjobs", "agg", "Degraded")["message"]
    )
    assert _application(cluster) is None

    cluster.core.create_namespaced_config_map(
        cluster.namespace,
        {"metadata": {"name": "shape-code"}, "data": {"shape.py": "def transform(f): return f"}},
    )
    wait_for(lambda: _application(cluster) is not None, 30, "the SparkApplication")
    app = _application(cluster)
    assert app is not None
    assert app["spec"]["restartPolicy"]["type"] == "OnFailure"
    assert {"name": "shape-code", "path": "/opt/onceflow/transform"} in app["spec"]["driver"][
        "configMaps"
    ]
    _report_state(cluster, "COMPLETED")
    wait_for(
        lambda: cluster.condition("sparkjobs", "agg", "Ready").get("reason") == "Completed",
        30,
        "the drained job Ready as Completed",
    )
    assert cluster.status("sparkjobs", "agg")["observedMode"] == "disabled"

    progress = {"batchId": 7, "timestamp": "2026-11-24T00:00:00.000Z", "inputRows": 12}
    progress |= {"batchDurationMs": 40, "stateRows": 3}
    cluster.core.create_namespaced_pod(
        cluster.namespace,
        {
            "metadata": {
                "name": "agg-driver",
                "labels": {"onceflow.io/sparkjob": "agg", "spark-role": "driver"},
                "annotations": {"onceflow.io/query-progress": json.dumps(progress)},
            },
            # Bound elsewhere: the local kubelet leaves it alone.
            "spec": {"nodeName": "elsewhere", "containers": [{"name": "d", "image": "x"}]},
        },
    )
    wait_for(
        lambda: cluster.status("sparkjobs", "agg").get("progress") == progress,
        30,
        "the driver's progress in the status",
    )


def _application_uid(cluster: Cluster) -> str | None:
    return (_application(cluster) or {}).get("metadata", {}).get("uid")


def _replaced(cluster: Cluster, uid: str | None, what: str) -> str:
    wait_for(lambda: _application_uid(cluster) not in (None, uid), 60, what)
    new = _application_uid(cluster)
    assert new is not None
    return new


def test_a_streaming_driver_restarts_into_edited_settings_and_code_and_after_it_exits(
    operator: tuple[Cluster, OperatorProcess, LocalKubelet], kafka_bootstrap: str
) -> None:
    """What the driver is told lives in its ConfigMap, outside the rendered application:
    an edit there (the output mode here) or of the transform's code replaces the
    application, so no driver keeps running what was edited away. A streaming driver
    that exited is started again from its checkpoint."""
    cluster, _, _ = operator
    _pipeline(cluster, kafka_bootstrap, "disabled")
    cluster.core.create_namespaced_config_map(
        cluster.namespace,
        {"metadata": {"name": "shape-code"}, "data": {"shape.py": "def transform(f): return f"}},
    )
    job = _job(2)
    job["spec"]["transform"] = {"module": "shape", "configMap": "shape-code"}
    cluster.create("sparkjobs", job)
    wait_for(lambda: _application(cluster) is not None, 30, "the SparkApplication")
    uid = _application_uid(cluster)

    cluster.core.patch_namespaced_config_map(
        "shape-code",
        cluster.namespace,
        {"data": {"shape.py": "def transform(f):\n    return f.select('key', 'value')\n"}},
    )
    uid = _replaced(cluster, uid, "a new SparkApplication after the code changed")

    cluster.patch_spec("sparkjobs", "agg", {"outputMode": "update"})
    uid = _replaced(cluster, uid, "a new SparkApplication after the output mode changed")
    settings = json.loads(
        cluster.core.read_namespaced_config_map("agg-job", cluster.namespace).data["job.json"]
    )
    assert settings["outputMode"] == "update"

    _report_state(cluster, "COMPLETED")
    _replaced(cluster, uid, "a new SparkApplication after the streaming driver exited")
    assert "DriverExited" in [event.reason for event in cluster.events("agg")]


def test_a_stopped_job_has_no_driver_and_its_sink_ids_fenced_and_resumes_on_its_checkpoint(
    operator: tuple[Cluster, OperatorProcess, LocalKubelet], kafka_bootstrap: str
) -> None:
    """spec.state: stopped is recorded before the application is deleted; once it (and
    its pods) are gone, the sink's ids are fenced: a zombie inside a transaction cannot
    commit. The Pipeline's paused holds it too; running again submits it anew, with the
    same sink producers and checkpoint."""
    cluster, _, _ = operator
    _pipeline(cluster, kafka_bootstrap, "enabled")
    cluster.create("sparkjobs", _job(2))
    _enabled(cluster)
    old_uid = (_application(cluster) or {})["metadata"]["uid"]
    prefix = f"{cluster.namespace}.orders"
    zombie = zombie_in_a_transaction(
        kafka_bootstrap, sink_transactional_id(prefix, "agg", 0), "orders.out"
    )

    cluster.patch_spec("sparkjobs", "agg", {"state": "stopped"})
    wait_for(
        lambda: cluster.condition("sparkjobs", "agg", "Ready").get("reason") == "Stopped",
        60,
        "Ready: Stopped",
    )
    status = cluster.status("sparkjobs", "agg")
    assert (status["state"], status["stopFenced"]) == ("stopped", True), status
    assert _application(cluster) is None, "no driver while stopped"
    reasons = [e.reason for e in cluster.events("agg")]
    assert "SinkFenced" in reasons[reasons.index("Stopping") :], reasons
    with pytest.raises(KafkaException):
        zombie.commit_transaction(30)

    # Paused by its Pipeline while running on its own: still held, as paused.
    cluster.patch_spec("pipelines", "orders", {"state": "paused"})
    cluster.patch_spec("sparkjobs", "agg", {"state": "running"})
    wait_for(
        lambda: cluster.condition("sparkjobs", "agg", "Ready").get("reason") == "Paused",
        60,
        "Ready: Paused",
    )
    assert _application(cluster) is None

    cluster.patch_spec("pipelines", "orders", {"state": "running"})
    wait_for(lambda: _application(cluster) is not None, 60, "the application submitted again")
    app = _application(cluster)
    assert app is not None and app["metadata"]["uid"] != old_uid
    assert app["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == "agg-checkpoint"
    wait_for(lambda: _running_in(cluster, "enabled"), 60, "the job running again")
    assert cluster.status("sparkjobs", "agg")["sinkPartitions"] == 2, "the same producers"
