"""kopf registrations only: each handler wires one kopf cause to a reconciler.

Reconcilers are idempotent passes (level-triggered): each object has a loop (a kopf
daemon, so peering pauses it) that runs a pass when a watch shows a change to
something the pass reads, and otherwise after the delay its last outcome calls for,
with a periodic resync as the net for anything no watch shows (``reconcile_loops``).
Passes never sleep: not-yet-possible steps end the pass and the loop looks again (a
pass waits only for what answers at once: a source system's check on a free thread,
for at most 0.2 s, and the graph read it shares with the passes asking with it).
"""

from __future__ import annotations

import logging
import os
from typing import Any

import kopf

from onceflow.api.base import API_GROUP, API_VERSION
from onceflow.control import webhook_certificates
from onceflow.control.admission import review
from onceflow.control.app import Controllers, build_controllers
from onceflow.control.errors import RetryLaterError
from onceflow.control.kube import KubeClient, StaleStatusError
from onceflow.control.operator_config import OperatorConfig, WebhookConfig
from onceflow.control.operator_metrics import CONDITIONS
from onceflow.control.reconcile_loops import (
    PIPELINES,
    SOURCES,
    SPARK_JOBS,
    Key,
    ReconcileLoops,
)
from onceflow.model.objects import LABEL_SOURCE, LABEL_SPARKJOB

log = logging.getLogger("onceflow")
CONFIG = OperatorConfig.from_environment(os.environ)
"""Read when kopf loads this module (``onceflow operator`` puts its flags in the
environment first): whether to register the webhook's handlers is decided here."""
_controllers: Controllers | None = None
_loops: ReconcileLoops | None = None


def controllers() -> Controllers:
    assert _controllers is not None, "operator not started"
    return _controllers


def loops() -> ReconcileLoops:
    assert _loops is not None, "operator not started"
    return _loops


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    global _controllers, _loops  # noqa: PLW0603 - the one process-wide wiring point
    # Progress and diff-base live in annotations so that status stays ours and strict.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=API_GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=API_GROUP, key="last-handled-configuration"
    )
    settings.posting.level = logging.WARNING
    settings.execution.max_workers = 16
    # A standby takes over this long after the active replica's last heartbeat.
    settings.peering.lifetime = CONFIG.peering_lifetime_s
    # Watching named namespaces needs no cluster-wide rights: kopf's scan for new
    # namespaces and CRDs (list/watch of both, cluster-wide) is off, and the resources
    # served are those the API offers at start (a CRD installed later, such as the
    # Spark operator's, is served after a restart).
    settings.scanning.disabled = bool(CONFIG.namespaces)
    _controllers = build_controllers(CONFIG)
    _loops = ReconcileLoops(CONFIG.requeue, CONFIG.reconcile_workers)
    wake = _loops.wake_from_thread
    _controllers.sources.answered = lambda namespace, name: wake(Key(SOURCES, namespace, name))
    _controllers.pipelines.hanging.changed = lambda namespace, name: wake(
        Key(PIPELINES, namespace, name)
    )
    # Drivers' Jobs and SparkApplications are filtered by the API server; pods are
    # filtered here (task and Spark pods share no label a selector could ask for).
    for group, plural in (("batch", "jobs"), ("sparkoperator.k8s.io", "sparkapplications")):
        settings.watching.label_selectors[group, plural] = LABEL_SPARKJOB
    if CONFIG.webhook is not None:
        _serve_webhook(settings, CONFIG.webhook, _controllers.kube)


def _serve_webhook(
    settings: kopf.OperatorSettings, webhook: WebhookConfig, kube: KubeClient
) -> None:
    certfile, pkeyfile = webhook.certfile, webhook.pkeyfile
    if webhook.cert_secret and webhook.host:
        certfile, pkeyfile = _own_certificate(kube, webhook)
    settings.admission.server = kopf.WebhookServer(
        addr=webhook.addr,
        host=webhook.host,
        port=webhook.port,
        certfile=certfile,
        pkeyfile=pkeyfile,
        cafile=webhook.cafile,
    )
    # Self-managed unless a deployment (the Helm chart) owns the configuration.
    if webhook.managed:
        settings.admission.managed = f"validation.{API_GROUP}"


def _own_certificate(kube: KubeClient, webhook: WebhookConfig) -> tuple[str, str]:
    """The serving certificate from the shared Secret (``namespace/name``), with its CA
    put into the webhook configuration the chart made without one."""
    assert webhook.cert_secret is not None and webhook.host is not None
    host = webhook.host
    namespace, _, name = webhook.cert_secret.partition("/")
    hosts = [host, f"{host}.cluster.local"] if host.endswith(".svc") else [host]
    served = webhook_certificates.ensure(kube, namespace, name, hosts)
    configuration = webhook.configuration
    if configuration and served.ca and not kube.set_webhook_ca_bundle(configuration, served.ca):
        log.warning("no ValidatingWebhookConfiguration %r to give the CA to", configuration)
    webhook_certificates.restart_before_expiry(served)
    return str(served.cert), str(served.key)


# -- one loop per object ----------------------------------------------------------------
# Stopped by kopf when the object goes or peering pauses this replica. A pass already
# running finishes on its thread even if kopf cancels the loop after 5 s; the object's
# next loop (and its finalizer) wait for it, so one object never has two passes.


@kopf.daemon(API_GROUP, API_VERSION, SOURCES, cancellation_backoff=5.0, cancellation_timeout=5.0)
async def source_loop(
    namespace: str | None, name: str, stopped: kopf.DaemonStopped, **_: Any
) -> None:
    await loops().run(_key(SOURCES, namespace, name), controllers().sources.reconcile, stopped)


@kopf.daemon(API_GROUP, API_VERSION, PIPELINES, cancellation_backoff=5.0, cancellation_timeout=5.0)
async def pipeline_loop(
    namespace: str | None, name: str, stopped: kopf.DaemonStopped, **_: Any
) -> None:
    await loops().run(_key(PIPELINES, namespace, name), controllers().pipelines.reconcile, stopped)


@kopf.daemon(API_GROUP, API_VERSION, SPARK_JOBS, cancellation_backoff=5.0, cancellation_timeout=5.0)
async def spark_job_loop(
    namespace: str | None, name: str, stopped: kopf.DaemonStopped, **_: Any
) -> None:
    await loops().run(
        _key(SPARK_JOBS, namespace, name), controllers().spark_jobs.reconcile, stopped
    )


def _key(plural: str, namespace: str | None, name: str) -> Key:
    assert namespace is not None, "Onceflow resources are namespaced"
    return Key(plural, namespace, name)


# -- what wakes the loops ----------------------------------------------------------------


def _deleted(event: kopf.RawEvent) -> bool:
    return event.get("type") == "DELETED"


def _own_event(plural: str, event: kopf.RawEvent, namespace: str | None, name: str) -> None:
    """Any event of a Onceflow object, told apart from the echo of its own pass's write."""
    key = _key(plural, namespace, name)
    kube = controllers().kube
    deleted = _deleted(event)
    if deleted:
        kube.forget_status_write(*key)
        CONDITIONS.deleted(*key)
        if plural == PIPELINES:
            controllers().pipelines.rollout_steps.forget((key.namespace, key.name))
            controllers().pipelines.hanging_counts.forget((key.namespace, key.name))
    version = event["object"].get("metadata", {}).get("resourceVersion", "")
    own = not deleted and kube.wrote_status(*key, version)
    if plural == PIPELINES:
        loops().pipeline_event(key, event["object"], deleted, own_write=own)
    else:
        loops().workload_event(key, event["object"], deleted, own_write=own)


@kopf.on.event(API_GROUP, API_VERSION, SOURCES)
async def source_event(event: kopf.RawEvent, namespace: str | None, name: str, **_: Any) -> None:
    _own_event(SOURCES, event, namespace, name)


@kopf.on.event(API_GROUP, API_VERSION, SPARK_JOBS)
async def spark_job_event(event: kopf.RawEvent, namespace: str | None, name: str, **_: Any) -> None:
    _own_event(SPARK_JOBS, event, namespace, name)


@kopf.on.event(API_GROUP, API_VERSION, PIPELINES)
async def pipeline_event(event: kopf.RawEvent, namespace: str | None, name: str, **_: Any) -> None:
    _own_event(PIPELINES, event, namespace, name)


def _owned_by(plural: str, label: str) -> Any:
    """An event handler for children labelled with their owner's name."""

    async def owned_event(namespace: str | None, labels: kopf.Labels, **_: Any) -> None:
        loops().owned_event(_key(plural, namespace, labels[label]))

    return owned_event


kopf.on.event("", "v1", "pods", labels={LABEL_SOURCE: kopf.PRESENT}, id="source-pod")(
    _owned_by(SOURCES, LABEL_SOURCE)
)
kopf.on.event("", "v1", "pods", labels={LABEL_SPARKJOB: kopf.PRESENT}, id="spark-pod")(
    _owned_by(SPARK_JOBS, LABEL_SPARKJOB)
)
kopf.on.event("batch", "v1", "jobs", labels={LABEL_SPARKJOB: kopf.PRESENT}, id="spark-submit")(
    _owned_by(SPARK_JOBS, LABEL_SPARKJOB)
)
kopf.on.event(
    "sparkoperator.k8s.io",
    "v1beta2",
    "sparkapplications",
    labels={LABEL_SPARKJOB: kopf.PRESENT},
    id="spark-application",
)(_owned_by(SPARK_JOBS, LABEL_SPARKJOB))


@kopf.on.event("", "v1", "configmaps")
async def configmap_event(namespace: str | None, name: str, **_: Any) -> None:
    if namespace is not None:
        loops().configmap_event(namespace, name)


@kopf.on.delete(API_GROUP, API_VERSION, "kafkasources")
async def finalize_source(namespace: str | None, name: str, **_: Any) -> None:
    assert namespace is not None, "Onceflow resources are namespaced"
    try:
        await loops().finalize(
            _key(SOURCES, namespace, name),
            lambda: controllers().sources.finalize(namespace, name),
            timeout_s=60.0,
        )
    except RetryLaterError as pending:
        raise kopf.TemporaryError(str(pending), delay=pending.delay_s) from None
    except StaleStatusError as stale:
        # A pass that outlived the wait for it wrote the source since it was read.
        raise kopf.TemporaryError(str(stale), delay=1.0) from None


def admit(body: kopf.Body, warnings: list[str], old: kopf.Body | None = None, **_: Any) -> None:
    parts = controllers()
    verdict = review(
        dict(body),
        parts.kube.get,
        parts.admission_listing,
        parts.sources.policy,
        dict(old) if old is not None else None,
    )
    warnings.extend(verdict.warnings)
    if not verdict.allowed:
        raise kopf.AdmissionError(verdict.message, code=422)


# kopf refuses to start with admission handlers but no webhook server, so the
# validating webhook exists only when one is configured.
if CONFIG.webhook is not None:
    for plural in ("kafkasources", "pipelines", "sparkjobs"):
        kopf.on.validate(API_GROUP, API_VERSION, plural, id=f"validate-{plural}")(admit)
