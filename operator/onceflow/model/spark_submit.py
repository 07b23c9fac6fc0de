"""``submitter: spark-submit``: a ``batch/v1`` Job whose pod is the Spark driver, for
clusters without the Spark operator. Built with no I/O.

The pod runs ``spark-submit --deploy-mode client`` against the cluster's API server,
so the driver lives in the Job's own pod rather than in one spark-submit creates:
- the driver's exit code is the pod's, so the Job restarts a failed query (from its
  checkpoint) without relying on spark-submit reporting a remote driver's failure;
- executors are owned by the driver pod (``spark.kubernetes.driver.pod.name``) and
  are garbage-collected with it, and no driver can outlive its Job;
- one Job, one pod, restarted in place (``restartPolicy: OnFailure``): there is
  never a second driver on the same checkpoint while the first still runs.
"""

from __future__ import annotations

from onceflow.api.driver import SparkJobSettings
from onceflow.api.spark import CPU_REQUEST_KEYS, DRIVER_SUFFIX, SparkJob
from onceflow.model.objects import (
    LABEL_SPARKJOB,
    METRICS_CONTAINER_PORT,
    POD_SECURITY_CONTEXT,
    SPARK_CONTAINER_SECURITY_CONTEXT,
    WorkloadImage,
    owner_references,
    spark_pod_labels,
)
from onceflow.model.spark_app import (
    CHECKPOINT_MOUNT,
    EXECUTOR_TEMPLATE,
    JOB_CONFIG_MOUNT,
    SPARK_SERVICE_ACCOUNT,
    TRANSFORM_MOUNT,
    Manifest,
    job_configmap_name,
    mounted_secrets,
    spark_conf,
    with_spec_hash,
)

DRIVER_MAIN = "/opt/onceflow/spark-main.py"
# spark-submit against the API server by the address the kubelet gives every
# container, not by name: a cluster without cluster DNS, or a pod whose DNS policy does
# not resolve cluster names, still reaches it (the serving certificate names the
# service's IP in every conformant cluster). An IPv6 address goes in brackets. A shell
# rather than the image's entry point, so any image with spark-submit can be the driver.
SUBMIT_COMMAND = [
    "/bin/sh",
    "-c",
    'host="$KUBERNETES_SERVICE_HOST"; case "$host" in *:*) host="[$host]" ;; esac; '
    'exec spark-submit --master "k8s://https://$host:$KUBERNETES_SERVICE_PORT" "$@"',
    "spark-submit",
]
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
# A streaming query restarts from its checkpoint as often as it fails (the Spark
# operator path's restartPolicy Always); the Job's backoff still spaces the restarts.
UNLIMITED_RESTARTS = 2**31 - 1


def submit_job_name(job: str) -> str:
    return f"{job}{DRIVER_SUFFIX}"


def submit_conf(
    job: SparkJob, settings: SparkJobSettings, image: str, pull_secrets: tuple[str, ...] = ()
) -> dict[str, str]:
    """Spark's Kubernetes settings for a driver running in this pod; ``$(POD_…)`` are
    expanded by the kubelet from the container's environment."""
    spec = job.spec
    conf = {
        **spark_conf(job, settings),
        "spark.kubernetes.namespace": job.metadata.namespace,
        "spark.kubernetes.container.image": image,
        "spark.kubernetes.driver.pod.name": "$(POD_NAME)",
        "spark.driver.host": "$(POD_IP)",
        "spark.driver.bindAddress": "0.0.0.0",
        "spark.kubernetes.authenticate.caCertFile": f"{SERVICE_ACCOUNT_DIR}/ca.crt",
        "spark.kubernetes.authenticate.oauthTokenFile": f"{SERVICE_ACCOUNT_DIR}/token",
        # Executors run as the drivers' account too, so a cloud identity given to it
        # (e.g. for s3a:// checkpoints) reaches the executors writing state.
        "spark.kubernetes.authenticate.executor.serviceAccountName": SPARK_SERVICE_ACCOUNT,
        "spark.kubernetes.executor.podTemplateFile": f"{JOB_CONFIG_MOUNT}/{EXECUTOR_TEMPLATE}",
        **{f"spark.kubernetes.executor.label.{k}": v for k, v in spark_pod_labels(job).items()},
        "spark.executor.instances": str(spec.executor.instances),
        "spark.executor.cores": str(spec.executor.cores),
        EXECUTOR_REQUEST_CORES: spec.cpu_request(EXECUTOR_REQUEST_CORES),
        "spark.executor.memory": spec.executor.memory,
        "spark.driver.cores": str(spec.driver.cores),
        "spark.driver.memory": spec.driver.memory,
    }
    if pull_secrets:
        conf["spark.kubernetes.container.image.pullSecrets"] = ",".join(pull_secrets)
    for secret, path in mounted_secrets(job, settings).items():
        conf[f"spark.kubernetes.executor.secrets.{secret}"] = path
    if spec.checkpoint.pvc:
        # Executors write state-store files under the checkpoint too.
        volume = "spark.kubernetes.executor.volumes.persistentVolumeClaim.checkpoint"
        conf[f"{volume}.options.claimName"] = spec.checkpoint.pvc
        conf[f"{volume}.mount.path"] = CHECKPOINT_MOUNT
    return conf


# What Spark adds to a Python driver's JVM heap for its pod (Spark's own rule for
# non-JVM jobs: 40 %, at least 384 MiB); here the driver pod is ours to size.
MEMORY_OVERHEAD_FACTOR = 0.4
MIN_MEMORY_OVERHEAD_MIB = 384
UNIT_MIB = {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}


# Spark's own key for a CPU request below the driver's cores (e.g. "500m"), which Spark
# honours for the driver pods it creates; here the driver pod is ours, so we do.
DRIVER_REQUEST_CORES, EXECUTOR_REQUEST_CORES = CPU_REQUEST_KEYS


def driver_resources(cpu: str, memory: str) -> Manifest:
    """Requests and a memory limit for the driver pod of a spark-submit Job, so it is
    never BestEffort (first evicted) and holds what spark-submit will start."""
    unit = memory[-1] if memory[-1] in UNIT_MIB else "m"  # Spark: a bare number is MiB
    heap_mib = float(memory.rstrip("kmgt")) * UNIT_MIB[unit]
    total = int(heap_mib + max(MIN_MEMORY_OVERHEAD_MIB, heap_mib * MEMORY_OVERHEAD_FACTOR))
    return {
        "requests": {"cpu": cpu, "memory": f"{total}Mi"},
        "limits": {"memory": f"{total}Mi"},
    }


def _from_field(name: str, path: str) -> Manifest:
    return {"name": name, "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": path}}}


def submit_job(
    job: SparkJob, settings: SparkJobSettings, workload_image: WorkloadImage, spark_version: str
) -> Manifest:
    spec = job.spec
    name = job.metadata.name
    image = workload_image.of(spec.image)
    conf = submit_conf(job, settings, image, workload_image.pull_secrets)
    arguments = ["--deploy-mode", "client", "--name", name]
    for key in sorted(conf):
        arguments += ["--conf", f"{key}={conf[key]}"]
    arguments += [DRIVER_MAIN, "--config", f"{JOB_CONFIG_MOUNT}/job.json"]
    volumes: list[Manifest] = [
        {"name": "job", "configMap": {"name": job_configmap_name(name)}},
    ]
    mounts: list[Manifest] = [{"name": "job", "mountPath": JOB_CONFIG_MOUNT, "readOnly": True}]
    if spec.transform.config_map:
        volumes.append({"name": "transform", "configMap": {"name": spec.transform.config_map}})
        mounts.append({"name": "transform", "mountPath": TRANSFORM_MOUNT, "readOnly": True})
    if spec.checkpoint.pvc:
        volumes.append(
            {"name": "checkpoint", "persistentVolumeClaim": {"claimName": spec.checkpoint.pvc}}
        )
        mounts.append({"name": "checkpoint", "mountPath": CHECKPOINT_MOUNT})
    for index, (secret, path) in enumerate(mounted_secrets(job, settings).items()):
        volumes.append({"name": f"secret-{index}", "secret": {"secretName": secret}})
        mounts.append({"name": f"secret-{index}", "mountPath": path, "readOnly": True})
    labels = {LABEL_SPARKJOB: name, "onceflow.io/mode": settings.mode.value}
    body: Manifest = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": submit_job_name(name),
            "namespace": job.metadata.namespace,
            "labels": labels,
            "ownerReferences": owner_references(job),
        },
        "spec": {
            "backoffLimit": UNLIMITED_RESTARTS,
            "template": {
                "metadata": {"labels": {**labels, **spark_pod_labels(job), "spark-role": "driver"}},
                "spec": {
                    "serviceAccountName": SPARK_SERVICE_ACCOUNT,
                    "restartPolicy": "OnFailure",
                    "securityContext": POD_SECURITY_CONTEXT,
                    "containers": [
                        {
                            "name": "driver",
                            "image": image,
                            "command": SUBMIT_COMMAND,
                            "args": arguments,
                            "env": [
                                _from_field("POD_NAME", "metadata.name"),
                                _from_field("POD_IP", "status.podIP"),
                                *spec.env_manifest,
                            ],
                            "resources": driver_resources(
                                spec.cpu_request(DRIVER_REQUEST_CORES),
                                spec.driver.memory,
                            ),
                            "securityContext": SPARK_CONTAINER_SECURITY_CONTEXT,
                            "ports": [METRICS_CONTAINER_PORT],
                            "volumeMounts": mounts,
                        }
                    ],
                    "volumes": volumes,
                },
            },
        },
    }
    if workload_image.pull_secrets:
        pod = body["spec"]["template"]["spec"]
        pod["imagePullSecrets"] = workload_image.pull_secret_refs()
    return with_spec_hash(body)


def submit_job_state(job_object: Manifest | None) -> str | None:
    """The Job's state in the Spark operator's words, so both submitters read alike."""
    if job_object is None:
        return None
    status = job_object.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("status") != "True":
            continue
        if condition.get("type") == "Failed":
            return "FAILED"
        if condition.get("type") == "Complete":
            return "COMPLETED"
    if status.get("ready"):
        return "RUNNING"
    return "SUBMITTED"
