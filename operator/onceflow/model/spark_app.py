"""Objects of a SparkJob: its settings ConfigMap and the Spark operator's
``sparkoperator.k8s.io/v1beta2`` SparkApplication, built with no I/O (the
spark-submit Job is in ``spark_submit``)."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from onceflow.api.driver import SparkJobSettings
from onceflow.api.pipeline import ExactlyOnceMode, Pipeline
from onceflow.api.spark import CPU_REQUEST_KEYS, DEFAULT_KAFKA_SINK_WRITER, SparkJob
from onceflow.model.objects import (
    KAFKA_SECRET_MOUNT,
    LABEL_SPARKJOB,
    METRICS_CONTAINER_PORT,
    METRICS_PORT,
    POD_SECURITY_CONTEXT,
    SPARK_CONTAINER_SECURITY_CONTEXT,
    WorkloadImage,
    owner_references,
    spark_pod_labels,
)

JOB_CONFIG_MOUNT = "/etc/onceflow"
CHECKPOINT_MOUNT = "/var/lib/onceflow/checkpoint"
SINK_SECRET_MOUNT = "/etc/onceflow-sink"
# transform.configMap's files, on the driver only: it ships them to the executors.
TRANSFORM_MOUNT = "/opt/onceflow/transform"
SPARK_MAIN = "local:///opt/onceflow/spark-main.py"
SPARK_SERVICE_ACCOUNT = "onceflow-spark"
ISOLATION_CONF = "spark.onceflow.kafka.isolation.level"
"""Carried in sparkConf so the isolation level is visible in the rendered object; the
driver's Kafka reader takes it from there."""
MODE_CONF = "spark.onceflow.exactlyOnce.mode"
SETTINGS_DIGEST_CONF = "spark.onceflow.settings.digest"
"""What the driver is told lives in the job's ConfigMap, outside the rendered object;
its digest in sparkConf makes every edit of it (transform, sink, dedup, output mode,
the transform's code) a changed spec, so the driver restarts into it."""
SPEC_HASH_ANNOTATION = "onceflow.io/spec-hash"

Manifest = dict[str, Any]


EXECUTOR_TEMPLATE = "executor-pod.json"


def executor_pod_template(job: SparkJob) -> Manifest:
    """Spark builds executor pods itself; a pod template (JSON is YAML) is how they get
    the security context Pod Security "restricted" asks for, and the job's ``env``
    (Secret references intact) the same way whichever submitter runs the job.
    Executors never call the API server (the driver manages them), so they get no
    ServiceAccount token for the job's code to read."""
    container: Manifest = {"name": "executor", "securityContext": SPARK_CONTAINER_SECURITY_CONTEXT}
    if job.spec.env:
        container["env"] = job.spec.env_manifest
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "spec": {
            "securityContext": POD_SECURITY_CONTEXT,
            "automountServiceAccountToken": False,
            "containers": [container],
        },
    }


def job_configmap_name(job: str) -> str:
    return f"{job}-job"


def job_configmap(job: SparkJob, settings: SparkJobSettings) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": job_configmap_name(job.metadata.name),
            "namespace": job.metadata.namespace,
            "labels": {LABEL_SPARKJOB: job.metadata.name},
            "ownerReferences": owner_references(job),
        },
        "data": {
            "job.json": json.dumps(settings.to_wire(), indent=2, sort_keys=True),
            EXECUTOR_TEMPLATE: json.dumps(executor_pod_template(job), indent=2, sort_keys=True),
        },
    }


def mounted_secrets(job: SparkJob, settings: SparkJobSettings) -> dict[str, str]:
    """Secret name -> mount path, on the driver and every executor: the sink's DSN, and
    the pipeline's Kafka settings (executors read Kafka, and a CA file must exist there)."""
    secrets = {}
    if job.spec.sink.postgres:
        secrets[job.spec.sink.postgres.secret_ref.name] = SINK_SECRET_MOUNT
    if settings.kafka_config_dir and settings.kafka_secret:
        secrets[settings.kafka_secret] = settings.kafka_config_dir
    return secrets


def spark_conf(job: SparkJob, settings: SparkJobSettings) -> dict[str, str]:
    """Onceflow's settings win over the user's ``sparkConf``. The Kafka connector needs
    none: the image keeps its jars in ``$SPARK_HOME/jars``, on every classpath (a
    ``spark.jars`` glob with ``local://`` is not expanded, so executors never got it)."""
    conf = {
        ISOLATION_CONF: settings.isolation_level,
        # The mode is part of the spec, so each rollout step restarts the driver into it.
        MODE_CONF: settings.mode.value,
        SETTINGS_DIGEST_CONF: digest(settings.to_wire()),
        # A speculative copy of a sink task would be one more writer to fence.
        "spark.speculation": "false",
        "spark.task.maxFailures": "4",
        "spark.sql.streaming.checkpointLocation": settings.checkpoint_location,
    }
    return {**job.spec.spark_conf, **conf}


def restart_policy(available_now: bool) -> Manifest:
    if available_now:
        return {
            "type": "OnFailure",
            "onFailureRetries": 2**31 - 1,
            "onFailureRetryInterval": 10,
            "onSubmissionFailureRetries": 2**31 - 1,
            "onSubmissionFailureRetryInterval": 20,
        }
    return {"type": "Always", "onFailureRetryInterval": 10, "onSubmissionFailureRetryInterval": 20}


def driver_config_maps(job: SparkJob) -> list[Manifest]:
    """The job's settings, and transform.configMap's files where the driver imports
    them."""
    maps = [{"name": job_configmap_name(job.metadata.name), "path": JOB_CONFIG_MOUNT}]
    if job.spec.transform.config_map:
        maps.append({"name": job.spec.transform.config_map, "path": TRANSFORM_MOUNT})
    return maps


def spark_application(
    job: SparkJob, settings: SparkJobSettings, image: WorkloadImage, spark_version: str
) -> Manifest:
    spec = job.spec
    mounts: list[Manifest] = []
    volumes: list[Manifest] = []
    if spec.checkpoint.pvc:
        volumes.append(
            {"name": "checkpoint", "persistentVolumeClaim": {"claimName": spec.checkpoint.pvc}}
        )
        mounts.append({"name": "checkpoint", "mountPath": CHECKPOINT_MOUNT})
    pod_common: Manifest = {
        "image": image.of(spec.image),
        "serviceAccount": SPARK_SERVICE_ACCOUNT,
        "configMaps": [{"name": job_configmap_name(job.metadata.name), "path": JOB_CONFIG_MOUNT}],
        "volumeMounts": mounts,
        "labels": spark_pod_labels(job),
        "podSecurityContext": POD_SECURITY_CONTEXT,
        "securityContext": SPARK_CONTAINER_SECURITY_CONTEXT,
    }
    secrets = [
        {"name": name, "path": path, "secretType": "Generic"}
        for name, path in mounted_secrets(job, settings).items()
    ]
    if secrets:
        pod_common["secrets"] = secrets
    body: Manifest = {
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "SparkApplication",
        "metadata": {
            "name": job.metadata.name,
            "namespace": job.metadata.namespace,
            "labels": {
                LABEL_SPARKJOB: job.metadata.name,
                "onceflow.io/mode": settings.mode.value,
            },
            "ownerReferences": owner_references(job),
        },
        "spec": {
            "type": "Python",
            "pythonVersion": "3",
            "mode": "cluster",
            "image": image.of(spec.image),
            "mainApplicationFile": SPARK_MAIN,
            "arguments": ["--config", f"{JOB_CONFIG_MOUNT}/job.json"],
            "sparkVersion": spark_version,
            "sparkConf": spark_conf(job, settings),
            # The checkpoint makes every restart resume the same batch: restart always,
            # except a drained availableNow run, which is done.
            "restartPolicy": restart_policy(spec.trigger.available_now),
            "volumes": volumes,
            # Executors get the job's env from their pod template only (see
            # executor_pod_template): set twice, a pod would list each name twice. The
            # driver's env, like its other pod settings here, is applied by the Spark
            # operator's mutating webhook, which must be enabled.
            "driver": {
                **copy.deepcopy(pod_common),
                "configMaps": driver_config_maps(job),
                "ports": [{**METRICS_CONTAINER_PORT, "protocol": "TCP"}],
                "cores": spec.driver.cores,
                "coreRequest": spec.cpu_request(CPU_REQUEST_KEYS[0]),
                "memory": spec.driver.memory,
                **({"env": spec.env_manifest} if spec.env else {}),
            },
            "executor": {
                **copy.deepcopy(pod_common),
                # The Spark operator runs spark-submit in its own pod, where no file of
                # the job's ConfigMap exists: it takes the template from here.
                "template": executor_pod_template(job),
                "instances": spec.executor.instances,
                "cores": spec.executor.cores,
                "coreRequest": spec.cpu_request(CPU_REQUEST_KEYS[1]),
                "memory": spec.executor.memory,
            },
        },
    }
    if image.pull_secrets:
        body["spec"]["imagePullSecrets"] = list(image.pull_secrets)
    return with_spec_hash(body)


def digest(value: Any) -> str:
    """A short stable digest of a JSON-able value."""
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def with_spec_hash(body: Manifest) -> Manifest:
    """Marks what was rendered, so a changed spec is seen without diffing objects that
    other controllers default and mutate."""
    body["metadata"]["annotations"] = {SPEC_HASH_ANNOTATION: digest(body["spec"])}
    return body


def spark_application_state(application: Manifest | None) -> str | None:
    state = ((application or {}).get("status") or {}).get("applicationState", {}).get("state")
    return str(state) if state else None


def job_settings(
    job: SparkJob,
    pipeline: Pipeline,
    mode: ExactlyOnceMode,
    source_topics: Mapping[str, str],
) -> SparkJobSettings:
    """The driver's settings: inputs resolved (KafkaSource names -> topics) and the
    rollout's current mode, which decides the isolation level."""
    spec = job.spec
    topics = spec.input.topics or [source_topics[name] for name in spec.input.sources or []]
    secret = pipeline.spec.kafka.auth_secret_ref
    return SparkJobSettings(
        job=job.metadata.name,
        namespace=job.metadata.namespace,
        mode=mode,
        bootstrap_servers=pipeline.spec.kafka.bootstrap_servers,
        transactional_id_prefix=pipeline.transactional_id_prefix,
        topics=topics,
        starting_offsets=spec.input.starting_offsets,
        max_offsets_per_trigger=spec.input.max_offsets_per_trigger,
        value_schema=spec.input.value_schema,
        watermark=spec.watermark,
        dedup=spec.dedup,
        transform=spec.transform,
        transform_dir=TRANSFORM_MOUNT if spec.transform.config_map else None,
        output_mode=spec.output_mode,
        metrics_port=METRICS_PORT,
        sink=spec.sink,
        kafka_sink_writer=spec.kafka_sink_writer or DEFAULT_KAFKA_SINK_WRITER,
        checkpoint_location=spec.checkpoint.path or CHECKPOINT_MOUNT,
        trigger=spec.trigger,
        postgres_dsn_file=f"{SINK_SECRET_MOUNT}/dsn" if spec.sink.postgres else None,
        kafka_config_dir=KAFKA_SECRET_MOUNT if secret else None,
        kafka_secret=secret.name if secret else None,
    )
