"""kopf registrations only: each handler wires one kopf cause to a reconciler.

Reconcilers are idempotent passes driven by timers (level-triggered, like Strimzi's
periodic reconciliation), so a missed event or an operator restart costs at most one
interval. Handlers never sleep: not-yet-possible steps end the pass and the next
tick observes again.
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

log = logging.getLogger("onceflow")
# One second keeps apply-to-running latency low; each pass is a few API reads.
RECONCILE_INTERVAL_S = float(os.environ.get("ONCEFLOW_RECONCILE_INTERVAL", "1.0"))
_controllers: Controllers | None = None


def controllers() -> Controllers:
    assert _controllers is not None, "operator not started"
    return _controllers


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    global _controllers  # noqa: PLW0603 - the one process-wide wiring point
    # Progress and diff-base live in annotations so that status stays ours and strict.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=API_GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=API_GROUP, key="last-handled-configuration"
    )
    settings.posting.level = logging.WARNING
    settings.execution.max_workers = 16
    # A standby takes over this long after the active replica's last heartbeat.
    settings.peering.lifetime = int(os.environ.get("ONCEFLOW_PEERING_LIFETIME_S", "60"))
    _controllers = build_controllers()
    port = os.environ.get("ONCEFLOW_WEBHOOK_PORT")
    if port:
        host = os.environ.get("ONCEFLOW_WEBHOOK_HOST")
        certfile = os.environ.get("ONCEFLOW_WEBHOOK_CERT")
        pkeyfile = os.environ.get("ONCEFLOW_WEBHOOK_KEY")
        secret = os.environ.get("ONCEFLOW_WEBHOOK_CERT_SECRET")
        if secret and host:
            certfile, pkeyfile = _own_certificate(_controllers.kube, secret, host)
        settings.admission.server = kopf.WebhookServer(
            addr=os.environ.get("ONCEFLOW_WEBHOOK_ADDR", "0.0.0.0"),
            host=host,
            port=int(port),
            certfile=certfile,
            pkeyfile=pkeyfile,
            cafile=os.environ.get("ONCEFLOW_WEBHOOK_CA"),
        )
        # Self-managed unless a deployment (the Helm chart) owns the configuration.
        if os.environ.get("ONCEFLOW_WEBHOOK_MANAGED", "true") != "false":
            settings.admission.managed = f"validation.{API_GROUP}"


def _own_certificate(kube: KubeClient, secret: str, host: str) -> tuple[str, str]:
    """The serving certificate from the shared Secret (``namespace/name``), with its CA
    put into the webhook configuration the chart made without one."""
    namespace, _, name = secret.partition("/")
    hosts = [host, f"{host}.cluster.local"] if host.endswith(".svc") else [host]
    served = webhook_certificates.ensure(kube, namespace, name, hosts)
    configuration = os.environ.get("ONCEFLOW_WEBHOOK_CONFIGURATION")
    if configuration and served.ca and not kube.set_webhook_ca_bundle(configuration, served.ca):
        log.warning("no ValidatingWebhookConfiguration %r to give the CA to", configuration)
    webhook_certificates.restart_before_expiry(served)
    return str(served.cert), str(served.key)


def _pass(kind: str, run: Any, namespace: str | None, name: str) -> None:
    assert namespace is not None, "Onceflow resources are namespaced"
    try:
        run(namespace, name)
    except (RetryLaterError, StaleStatusError) as pending:
        log.info("%s %s/%s: %s", kind, namespace, name, pending)


@kopf.timer(
    API_GROUP,
    API_VERSION,
    "kafkasources",
    interval=RECONCILE_INTERVAL_S,
    initial_delay=0,
    sharp=False,
)
def reconcile_source(namespace: str | None, name: str, **_: Any) -> None:
    _pass("KafkaSource", controllers().sources.reconcile, namespace, name)


@kopf.timer(
    API_GROUP, API_VERSION, "pipelines", interval=RECONCILE_INTERVAL_S, initial_delay=0, sharp=False
)
def reconcile_pipeline(namespace: str | None, name: str, **_: Any) -> None:
    _pass("Pipeline", controllers().pipelines.reconcile, namespace, name)


@kopf.timer(
    API_GROUP, API_VERSION, "sparkjobs", interval=RECONCILE_INTERVAL_S, initial_delay=0, sharp=False
)
def reconcile_spark_job(namespace: str | None, name: str, **_: Any) -> None:
    _pass("SparkJob", controllers().spark_jobs.reconcile, namespace, name)


@kopf.on.delete(API_GROUP, API_VERSION, "kafkasources")
def finalize_source(namespace: str | None, name: str, **_: Any) -> None:
    assert namespace is not None, "Onceflow resources are namespaced"
    try:
        controllers().sources.finalize(namespace, name)
    except RetryLaterError as pending:
        raise kopf.TemporaryError(str(pending), delay=pending.delay_s) from None


def admit(body: kopf.Body, warnings: list[str], **_: Any) -> None:
    kube = controllers().kube
    verdict = review(dict(body), kube.get, kube.list_objects)
    warnings.extend(verdict.warnings)
    if not verdict.allowed:
        raise kopf.AdmissionError(verdict.message, code=422)


# kopf refuses to start with admission handlers but no webhook server, so the
# validating webhook exists only when one is configured.
if os.environ.get("ONCEFLOW_WEBHOOK_PORT"):
    for plural in ("kafkasources", "pipelines", "sparkjobs"):
        kopf.on.validate(API_GROUP, API_VERSION, plural, id=f"validate-{plural}")(admit)
