"""The operator's configuration, read once from its environment into one typed object
that is passed down: the chart and ``onceflow operator``'s flags both arrive as
environment variables (kopf loads the handlers module, so the flags cannot be handed to
it any other way), and reading them in one place means a wrong value stops the
operator at start with the variable's name, rather than surfacing in the first pass
that happens to read it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from onceflow.logic.requeue import RequeuePolicy
from onceflow.logic.tenant_policy import TenantPolicy, policy_from
from onceflow.model.objects import WorkloadImage


class OperatorConfigError(ValueError):
    """An environment variable the operator reads holds a value it cannot use."""


@dataclass(frozen=True)
class WebhookConfig:
    """The validating webhook's server (``ONCEFLOW_WEBHOOK_*``)."""

    port: int
    addr: str = "0.0.0.0"
    host: str | None = None
    certfile: str | None = None
    pkeyfile: str | None = None
    cafile: str | None = None
    cert_secret: str | None = None
    """``namespace/name`` of the Secret the replicas share a serving certificate in."""
    configuration: str | None = None
    """The ValidatingWebhookConfiguration the chart made, to give the CA to."""
    managed: bool = True
    """Whether kopf manages the configuration (not when a deployment owns it)."""


@dataclass(frozen=True)
class OperatorConfig:
    namespaces: tuple[str, ...] = ()
    """Watched namespaces (none: the whole cluster)."""
    kubeconfig: str | None = None
    requeue: RequeuePolicy = field(default_factory=RequeuePolicy)
    reconcile_workers: int = 16
    """Passes run at once. They mostly wait on the API server and the broker: under a
    burst of 50 spec changes at 500 sources, 16 brought apply -> pods p99 from 12.4 s
    (8) to 10.6 s (benchmarks/operator_scale.py)."""
    peering_lifetime_s: int = 60
    """A standby takes over this long after the active replica's last heartbeat."""
    fence_timeout_s: float = 30.0
    """Bound on one fencing attempt per id: a broker that cannot answer in it is
    reported Degraded and retried with backoff rather than waited on."""
    progress_deadline_s: float | None = 600.0
    """Progressing for longer is reported Degraded too (None: never)."""
    hanging_look_s: float = 15.0
    """How often every Pipeline's partitions are looked at for a hanging transaction."""
    hanging_after_s: float | None = None
    """How long a last stable offset may stand (None: not judged)."""
    image: WorkloadImage = field(default_factory=WorkloadImage)
    policy: TenantPolicy = field(default_factory=TenantPolicy)
    webhook: WebhookConfig | None = None

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> OperatorConfig:
        read = _Reader(environ)
        defaults, requeue = cls(), RequeuePolicy()
        return cls(
            namespaces=tuple(sorted(read.names("ONCEFLOW_NAMESPACES"))),
            kubeconfig=environ.get("KUBECONFIG") or None,
            requeue=RequeuePolicy(
                resync_s=read.number("ONCEFLOW_RESYNC_S", requeue.resync_s),
                first_poll_s=read.number("ONCEFLOW_POLL_S", requeue.first_poll_s),
                max_poll_s=read.number("ONCEFLOW_MAX_POLL_S", requeue.max_poll_s),
                resyncs_per_s=read.number(
                    "ONCEFLOW_RESYNCS_PER_S", requeue.resyncs_per_s, "a number of passes a second"
                ),
                max_resync_s=read.number("ONCEFLOW_MAX_RESYNC_S", requeue.max_resync_s),
            ),
            reconcile_workers=read.count("ONCEFLOW_RECONCILE_WORKERS", defaults.reconcile_workers),
            peering_lifetime_s=read.count(
                "ONCEFLOW_PEERING_LIFETIME_S", defaults.peering_lifetime_s
            ),
            fence_timeout_s=read.number("ONCEFLOW_FENCE_TIMEOUT_S", defaults.fence_timeout_s),
            progress_deadline_s=read.number(
                "ONCEFLOW_PROGRESS_DEADLINE_S", defaults.progress_deadline_s or 0.0
            )
            or None,
            hanging_look_s=read.number("ONCEFLOW_HANGING_LOOK_S", defaults.hanging_look_s),
            hanging_after_s=read.number("ONCEFLOW_HANGING_AFTER_S", 0.0) or None,
            image=WorkloadImage.from_environment(environ),
            policy=policy_from(environ),
            webhook=_webhook(environ, read),
        )


def _webhook(environ: Mapping[str, str], read: _Reader) -> WebhookConfig | None:
    if not environ.get("ONCEFLOW_WEBHOOK_PORT"):
        return None
    return WebhookConfig(
        port=read.count("ONCEFLOW_WEBHOOK_PORT", 0),
        addr=environ.get("ONCEFLOW_WEBHOOK_ADDR") or "0.0.0.0",
        host=environ.get("ONCEFLOW_WEBHOOK_HOST") or None,
        certfile=environ.get("ONCEFLOW_WEBHOOK_CERT") or None,
        pkeyfile=environ.get("ONCEFLOW_WEBHOOK_KEY") or None,
        cafile=environ.get("ONCEFLOW_WEBHOOK_CA") or None,
        cert_secret=environ.get("ONCEFLOW_WEBHOOK_CERT_SECRET") or None,
        configuration=environ.get("ONCEFLOW_WEBHOOK_CONFIGURATION") or None,
        managed=environ.get("ONCEFLOW_WEBHOOK_MANAGED", "true") != "false",
    )


class _Reader:
    """Typed reads of variables, each failure naming the variable and what it wants."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ = environ

    def names(self, variable: str) -> frozenset[str]:
        listed = self.environ.get(variable, "")
        return frozenset(name.strip() for name in listed.split(",") if name.strip())

    def number(self, variable: str, default: float, what: str = "a number of seconds") -> float:
        raw = self.environ.get(variable, "").strip()
        if not raw:
            return default
        try:
            value = float(raw)
        except ValueError:
            value = float("nan")
        if not value >= 0:  # NaN too
            raise OperatorConfigError(f"{variable}={raw!r}: must be {what}, 0 or more")
        return value

    def count(self, variable: str, default: int) -> int:
        raw = self.environ.get(variable, "").strip()
        if not raw:
            return default
        if not raw.isdigit():
            raise OperatorConfigError(f"{variable}={raw!r}: must be a whole number, 0 or more")
        return int(raw)
