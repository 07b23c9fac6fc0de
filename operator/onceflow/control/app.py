"""The operator's long-lived parts, built once at startup and shared by handlers."""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import version

from onceflow.connectors.registry import operator_loader
from onceflow.control.graph import GraphReads, Listing
from onceflow.control.hanging_watch import HangingWatch, forgotten_after_s
from onceflow.control.kube import KubeClient, Obj, load_config
from onceflow.control.operator_config import OperatorConfig
from onceflow.control.pipeline import PipelineReconciler
from onceflow.control.shared_reads import SharedReads
from onceflow.control.source import SourceReconciler
from onceflow.control.sparkjob import SparkJobReconciler

ADMISSION_LIST_TIMEOUT_S = 8.0
GRAPH_LIST_TIMEOUT_S = 30.0


@dataclass
class Controllers:
    kube: KubeClient
    sources: SourceReconciler
    pipelines: PipelineReconciler
    spark_jobs: SparkJobReconciler
    admission_listing: Listing
    """The stored objects the webhook judges against, read once for requests that
    arrive together (``shared_reads``)."""


def build_controllers(config: OperatorConfig) -> Controllers:
    # Cross-namespace checks (a transactional-id prefix used twice) look at the watched
    # namespaces only: a namespaced install may read nothing else. Workload pods run
    # the operator's own image unless their spec names another (config.image).
    kube = KubeClient(load_config(config.kubeconfig), config.namespaces)
    # Bounded as the webhook's reads are: a hung LIST would hold every pass sharing it.
    graph = GraphReads(
        lambda plural, namespace: kube.list_objects(plural, namespace, GRAPH_LIST_TIMEOUT_S),
        operator_loader(config.policy.connector_modules),
    )
    sources = SourceReconciler(
        kube,
        config.image,
        graph,
        fence_timeout_s=config.fence_timeout_s,
        policy=config.policy,
        progress_deadline_s=config.progress_deadline_s,
    )
    spark_jobs = SparkJobReconciler(
        kube,
        config.image,
        version("pyspark"),
        graph,
        fence_timeout_s=config.fence_timeout_s,
        policy=config.policy,
        progress_deadline_s=config.progress_deadline_s,
    )
    pipelines = PipelineReconciler(
        kube,
        config.policy,
        progress_deadline_s=config.progress_deadline_s,
        hanging=HangingWatch(
            config.hanging_look_s, forget_after_s=forgotten_after_s(config.requeue)
        ),
        hanging_after_s=config.hanging_after_s,
    )
    # Bounded below the webhook's 10 s: a hung LIST would otherwise hold every review
    # that shares it, and with failurePolicy Fail refuse every write of the kind.
    lists: SharedReads[tuple[str, str], list[Obj]] = SharedReads(
        lambda key: kube.list_objects(*key, timeout_s=ADMISSION_LIST_TIMEOUT_S)
    )
    return Controllers(
        kube, sources, pipelines, spark_jobs, lambda plural, namespace: lists((plural, namespace))
    )
