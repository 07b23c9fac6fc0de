"""Kubernetes objects of a task generation, built from specs with no I/O.

A generation is one ConfigMap (every task's TaskSettings as JSON) and one bare pod
per task, owned by the KafkaSource. Bare pods, not a Deployment or StatefulSet: the
operator must decide exactly which generation runs and when each pod may start
(after fencing), which no built-in controller can be told.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from onceflow.api.base import GROUP_VERSION
from onceflow.api.source import KafkaSource, ResourceRequirements
from onceflow.api.spark import SparkJob
from onceflow.api.task import TaskSettings
from onceflow.model.checkpoint_places import label_value, place_of
from onceflow.model.names import task_pod_name

CONFIG_MOUNT = "/etc/onceflow"
DEFAULT_TASK_IMAGE = "ghcr.io/onceflow/onceflow:0.1.0"
"""The image task pods run unless the operator is given another (ONCEFLOW_TASK_IMAGE)."""


@dataclass(frozen=True)
class WorkloadImage:
    """What every workload pod the operator makes gets from its installation: the image
    for a workload whose spec names none, and the registry credentials (the chart's
    ``imagePullSecrets``) for all, since a private registry holds both images."""

    default: str = DEFAULT_TASK_IMAGE
    pull_secrets: tuple[str, ...] = ()

    def of(self, named: str | None) -> str:
        return named or self.default

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> WorkloadImage:
        """The chart's settings on the operator (``render`` reads the same ones)."""
        secrets = environ.get("ONCEFLOW_IMAGE_PULL_SECRETS", "")
        return cls(
            environ.get("ONCEFLOW_TASK_IMAGE", DEFAULT_TASK_IMAGE),
            tuple(name.strip() for name in secrets.split(",") if name.strip()),
        )

    def pull_secret_refs(self) -> list[dict[str, str]]:
        return [{"name": name} for name in self.pull_secrets]


KAFKA_SECRET_MOUNT = "/etc/onceflow-kafka"
CONNECTOR_SECRET_MOUNT = "/etc/onceflow-connector"
TASK_SERVICE_ACCOUNT = "onceflow-task"
METRICS_PORT = 9404
METRICS_CONTAINER_PORT = {"name": "metrics", "containerPort": METRICS_PORT}
# Tasks finish their open transaction on SIGTERM; 30 s covers a commit retried
# against a slow broker. Past it the operator fences, so nothing is lost by waiting less.
TASK_GRACE_SECONDS = 30

LABEL_SOURCE = "onceflow.io/source"
LABEL_GENERATION = "onceflow.io/generation"
LABEL_TASK = "onceflow.io/task"
LABEL_MODE = "onceflow.io/mode"
LABEL_INCARNATION = "onceflow.io/incarnation"
LABEL_POD_TEMPLATE = "onceflow.io/pod-template"
LABEL_SPARKJOB = "onceflow.io/sparkjob"
"""On a SparkJob's application and on every driver and executor pod of it."""
LABEL_CHECKPOINT = "onceflow.io/checkpoint"
"""On every driver and executor pod: the checkpoint it works on (its
``model.checkpoint_places.label_value``), so that a job about to start on a
checkpoint can find another job's pods still on it."""


def spark_pod_labels(job: SparkJob) -> dict[str, str]:
    """What every driver and executor pod of the job carries."""
    return {LABEL_SPARKJOB: job.metadata.name, LABEL_CHECKPOINT: label_value(place_of(job))}


Manifest = dict[str, Any]


def configmap_name(source: str, generation: int) -> str:
    return f"{source}-g{generation}"


def controller_of(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    """The kind and name of the Onceflow resource that controls ``obj`` (its
    controller reference in Onceflow's group), or None: an object of someone else's."""
    for reference in obj.get("metadata", {}).get("ownerReferences") or []:
        group = str(reference.get("apiVersion", "")).split("/")[0]
        if reference.get("controller") and group == GROUP_VERSION.split("/")[0]:
            return str(reference.get("kind")), str(reference.get("name"))
    return None


def owner_references(owner: KafkaSource | SparkJob) -> list[dict[str, Any]]:
    """Owned by the Onceflow resource; none when rendering offline (no uid exists yet)."""
    if not owner.metadata.uid:
        return []
    return [
        {
            "apiVersion": GROUP_VERSION,
            "kind": owner.kind,
            "name": owner.metadata.name,
            "uid": owner.metadata.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


def task_labels(settings: TaskSettings) -> dict[str, str]:
    labels = {
        "app.kubernetes.io/name": "onceflow-task",
        "app.kubernetes.io/managed-by": "onceflow",
        LABEL_SOURCE: settings.source,
        LABEL_GENERATION: str(settings.generation),
        LABEL_TASK: str(settings.task_id),
        LABEL_MODE: settings.mode.value,
    }
    if settings.incarnation:
        # Generation numbers restart with an incarnation: the pair tells pods apart.
        labels[LABEL_INCARNATION] = settings.incarnation
    return labels


def generation_configmap(source: KafkaSource, settings: Sequence[TaskSettings]) -> Manifest:
    generation = settings[0].generation
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": configmap_name(source.metadata.name, generation),
            "namespace": source.metadata.namespace,
            "labels": {LABEL_SOURCE: source.metadata.name, LABEL_GENERATION: str(generation)},
            "ownerReferences": owner_references(source),
        },
        "data": {
            f"task-{s.task_id}.json": json.dumps(s.to_wire(), indent=2, sort_keys=True)
            for s in settings
        },
    }


def pod_template_hash(source: KafkaSource, image: WorkloadImage, kafka_secret: str | None) -> str:
    """A digest of what a task pod is made of beyond its task configuration (image,
    resources, the auth mount). A change rolls the pods within their generation: the
    task configs, ids and offsets are the same, and each new pod's initialisation
    fences the old pod of its id, so no new generation (and no fencing round) is due."""
    parts: dict[str, Any] = {
        "image": image.of(source.spec.image),
        "resources": source.spec.resources.to_wire(),
        "kafkaSecret": kafka_secret,
    }
    # Only when set: the pods of every other source keep their hash, so upgrading the
    # operator restarts none of them.
    if connector_secret := source.spec.connector.secret_ref:
        parts["connectorSecret"] = connector_secret.name
    if source.spec.volumes:
        parts["volumes"] = [volume.to_wire() for volume in source.spec.volumes]
    if image.pull_secrets:
        parts["pullSecrets"] = list(image.pull_secrets)
    canonical = json.dumps(parts, sort_keys=True).encode()
    return hashlib.sha256(canonical).hexdigest()[:12]


# What Pod Security's "restricted" level asks of every pod, met by every pod Onceflow
# creates: a non-root user (the image's 65532, which also owns mounted volumes through
# fsGroup), the runtime's default seccomp profile, no privilege escalation and no
# capabilities. The root filesystem is read-only; /tmp is an emptyDir.
POD_SECURITY_CONTEXT: Manifest = {
    "runAsNonRoot": True,
    "runAsUser": 65532,
    "runAsGroup": 65532,
    "fsGroup": 65532,
    "seccompProfile": {"type": "RuntimeDefault"},
}
SPARK_CONTAINER_SECURITY_CONTEXT: Manifest = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
}
"""Spark's containers keep a writable root: its scripts and Python workers write
outside the local dirs Spark mounts."""
CONTAINER_SECURITY_CONTEXT: Manifest = {
    **SPARK_CONTAINER_SECURITY_CONTEXT,
    "readOnlyRootFilesystem": True,
}
# A task is one Python process with one producer: small, but never BestEffort (the
# first evicted under node pressure). Each key the spec sets wins.
TASK_DEFAULT_RESOURCES = ResourceRequirements(
    requests={"cpu": "100m", "memory": "256Mi"}, limits={"memory": "512Mi"}
)


def with_defaults(resources: ResourceRequirements, defaults: ResourceRequirements) -> Manifest:
    """A default limit only for a resource the spec says nothing about: a user's larger
    request must not end up above the default limit."""
    given = resources.requests.keys() | resources.limits.keys()
    limits = {k: v for k, v in defaults.limits.items() if k not in given}
    return {
        "requests": {**defaults.requests, **resources.requests},
        "limits": {**limits, **resources.limits},
    }


def task_pod(
    source: KafkaSource,
    settings: TaskSettings,
    image: WorkloadImage,
    kafka_secret: str | None = None,
) -> Manifest:
    name = source.metadata.name
    labels = {
        **task_labels(settings),
        LABEL_POD_TEMPLATE: pod_template_hash(source, image, kafka_secret),
    }
    resources = source.spec.resources
    mounts: list[Manifest] = [{"name": "config", "mountPath": CONFIG_MOUNT, "readOnly": True}]
    volumes: list[Manifest] = [
        {"name": "config", "configMap": {"name": configmap_name(name, settings.generation)}}
    ]
    if kafka_secret:
        mounts.append({"name": "kafka", "mountPath": KAFKA_SECRET_MOUNT, "readOnly": True})
        volumes.append({"name": "kafka", "secret": {"secretName": kafka_secret}})
    if connector_secret := source.spec.connector.secret_ref:
        mounts.append({"name": "connector", "mountPath": CONNECTOR_SECRET_MOUNT, "readOnly": True})
        volumes.append({"name": "connector", "secret": {"secretName": connector_secret.name}})
    mounts += [volume.mount() for volume in source.spec.volumes]
    volumes += [volume.pod_volume() for volume in source.spec.volumes]
    pod: Manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": task_pod_name(name, settings.generation, settings.task_id),
            "namespace": source.metadata.namespace,
            "labels": labels,
            "ownerReferences": owner_references(source),
        },
        "spec": {
            # Exit 0 is "stopped or superseded": such a pod must stay down. Any other
            # exit (75 fenced while current, 1 error) restarts in place.
            "restartPolicy": "OnFailure",
            "serviceAccountName": TASK_SERVICE_ACCOUNT,
            "terminationGracePeriodSeconds": TASK_GRACE_SECONDS,
            "securityContext": POD_SECURITY_CONTEXT,
            "containers": [
                {
                    "name": "task",
                    "image": image.of(source.spec.image),
                    # Arguments to the image's entry point (tini, then `onceflow`), so
                    # signals reach the task through an init process.
                    "args": ["task", "--config", f"{CONFIG_MOUNT}/task-{settings.task_id}.json"],
                    "ports": [METRICS_CONTAINER_PORT],
                    "resources": with_defaults(resources, TASK_DEFAULT_RESOURCES),
                    "securityContext": CONTAINER_SECURITY_CONTEXT,
                    # The task writes why it failed there; a crash leaves its last logs.
                    "terminationMessagePolicy": "FallbackToLogsOnError",
                    "volumeMounts": [*mounts, {"name": "tmp", "mountPath": "/tmp"}],
                }
            ],
            "volumes": [*volumes, {"name": "tmp", "emptyDir": {}}],
        },
    }
    if image.pull_secrets:
        pod["spec"]["imagePullSecrets"] = image.pull_secret_refs()
    return pod


def task_rbac(namespace: str) -> list[Manifest]:
    """The task pods' identity: it may read KafkaSources (for the generation check)
    in its own namespace, and nothing else."""
    labels = {"app.kubernetes.io/managed-by": "onceflow"}
    meta = {"name": TASK_SERVICE_ACCOUNT, "namespace": namespace, "labels": labels}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": meta,
            "rules": [
                {
                    "apiGroups": [GROUP_VERSION.split("/")[0]],
                    "resources": ["kafkasources"],
                    "verbs": ["get"],
                }
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta,
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": TASK_SERVICE_ACCOUNT,
            },
            "subjects": [
                {"kind": "ServiceAccount", "name": TASK_SERVICE_ACCOUNT, "namespace": namespace}
            ],
        },
    ]
