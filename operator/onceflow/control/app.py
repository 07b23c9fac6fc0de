"""The operator's long-lived parts, built once at startup and shared by handlers."""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib.metadata import version

from onceflow.control.graph import Listing
from onceflow.control.hanging_watch import HangingWatch
from onceflow.control.kube import KubeClient, Obj, load_config
from onceflow.control.pipeline import PipelineReconciler
from onceflow.control.shared_reads import SharedReads
from onceflow.control.source import SourceReconciler
from onceflow.control.sparkjob import SparkJobReconciler
from onceflow.logic.tenant_policy import policy_from
from onceflow.model.objects import WorkloadImage

ADMISSION_LIST_TIMEOUT_S = 8.0


@dataclass
class Controllers:
    kube: KubeClient
    sources: SourceReconciler
    pipelines: PipelineReconciler
    spark_jobs: SparkJobReconciler
    admission_listing: Listing
    """The stored objects the webhook judges against, read once for requests that
    arrive together (``shared_reads``)."""


def _names(variable: str) -> frozenset[str]:
    listed = os.environ.get(variable, "")
    return frozenset(name.strip() for name in listed.split(",") if name.strip())


def build_controllers() -> Controllers:
    # Cross-namespace checks (a transactional-id prefix used twice) look at the watched
    # namespaces only: a namespaced install may read nothing else.
    watched = tuple(sorted(_names("ONCEFLOW_NAMESPACES")))
    kube = KubeClient(load_config(os.environ.get("KUBECONFIG")), watched)
    # Workload pods run the operator's own image unless their spec names another, and
    # get the chart's imagePullSecrets: the chart sets both on the operator.
    image = WorkloadImage.from_environment(os.environ)
    # Per-id bound on one fencing attempt: a broker that cannot answer in this time is
    # reported as Degraded and retried with backoff rather than waited on.
    fence_timeout = float(os.environ.get("ONCEFLOW_FENCE_TIMEOUT_S", "30"))
    # What the platform admin allows tenants beyond the defaults (logic.tenant_policy).
    policy = policy_from(os.environ)
    # Progressing for longer than this is reported as Degraded too (0: never).
    deadline = float(os.environ.get("ONCEFLOW_PROGRESS_DEADLINE_S", "600")) or None
    sources = SourceReconciler(
        kube,
        image,
        fence_timeout_s=fence_timeout,
        policy=policy,
        progress_deadline_s=deadline,
    )
    spark_jobs = SparkJobReconciler(
        kube,
        image,
        version("pyspark"),
        fence_timeout_s=fence_timeout,
        policy=policy,
        progress_deadline_s=deadline,
    )
    # How often the partitions of every Pipeline are looked at for a hanging
    # transaction, and (when set) how long a last stable offset may stand.
    hanging_after = float(os.environ.get("ONCEFLOW_HANGING_AFTER_S", "0")) or None
    pipelines = PipelineReconciler(
        kube,
        policy,
        progress_deadline_s=deadline,
        hanging=HangingWatch(float(os.environ.get("ONCEFLOW_HANGING_LOOK_S", "15"))),
        hanging_after_s=hanging_after,
    )
    # Bounded below the webhook's 10 s: a hung LIST would otherwise hold every review
    # that shares it, and with failurePolicy Fail refuse every write of the kind.
    lists: SharedReads[tuple[str, str], list[Obj]] = SharedReads(
        lambda key: kube.list_objects(*key, timeout_s=ADMISSION_LIST_TIMEOUT_S)
    )
    return Controllers(
        kube, sources, pipelines, spark_jobs, lambda plural, namespace: lists((plural, namespace))
    )
