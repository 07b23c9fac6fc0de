"""The admission webhook's serving certificate, kept by the operator itself.

Every replica calls ``ensure``: the first to find no Secret creates the CA and serving
certificate, the others read what it stored (a lost create is a 409), so all serve the
same certificate. A Secret without ``ca.key`` belongs to someone else (cert-manager, a
user's own) and is used as it is. The CA goes into the ValidatingWebhookConfiguration's
``caBundle``, which the chart leaves empty so that ``helm template`` is deterministic.
"""

from __future__ import annotations

import datetime
import logging
import os
import signal
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509

from onceflow.control.kube import KubeClient
from onceflow.model.certificates import (
    RENEW_BEFORE,
    WebhookCertificates,
    needs_renewal,
    new_certificates,
    new_serving,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServingFiles:
    cert: Path
    key: Path
    ca: str
    """The CA (PEM) the API server must trust; empty if the Secret has none."""


def ensure(kube: KubeClient, namespace: str, secret: str, hosts: list[str]) -> ServingFiles:
    while True:
        now = datetime.datetime.now(datetime.UTC)
        found = kube.secret_if_present(namespace, secret)
        if found is None:
            made = new_certificates(hosts, now)
            if kube.write_secret(namespace, secret, made.to_secret_data(), None):
                log.info("webhook certificate for %s created in Secret %s", hosts, secret)
                return _files(made.cert, made.key, made.ca_cert)
            continue  # another replica created it first: use that one
        data, version = found
        stored = WebhookCertificates.from_secret_data(data)
        if stored is None:  # not ours: cert-manager's or the user's
            if not (data.get("tls.crt") and data.get("tls.key")):
                raise ValueError(
                    f"Secret {namespace}/{secret} has no tls.crt and tls.key: give it both "
                    "(and ca.crt), or delete it and the operator makes its own"
                )
            return _files(data["tls.crt"], data["tls.key"], data.get("ca.crt", ""))
        if not needs_renewal(stored, hosts, now):
            return _files(stored.cert, stored.key, stored.ca_cert)
        renewed = new_serving(stored.ca_cert, stored.ca_key, hosts, now)
        if kube.write_secret(namespace, secret, renewed.to_secret_data(), version):
            log.info("webhook certificate for %s renewed in Secret %s", hosts, secret)
            return _files(renewed.cert, renewed.key, renewed.ca_cert)


def _files(cert: str, key: str, ca: str) -> ServingFiles:
    """kopf's webhook server reads files: written where only this process reads."""
    directory = Path(tempfile.mkdtemp(prefix="onceflow-webhook-"))  # 0700
    (directory / "tls.crt").write_text(cert)
    key_file = directory / "tls.key"
    key_file.touch(mode=0o600)
    key_file.write_text(key)
    return ServingFiles(directory / "tls.crt", key_file, ca)


CHECK_EVERY_S = 12 * 3600


def restart_before_expiry(served: ServingFiles) -> None:
    """kopf reads the certificate once, at start, and starting is when it is renewed:
    a long-running operator whose served certificate nears its end (half the renewal
    margin left) stops gracefully, and its restart serves a renewed one."""
    expires = x509.load_pem_x509_certificate(served.cert.read_bytes()).not_valid_after_utc

    def watch() -> None:
        while True:
            time.sleep(CHECK_EVERY_S)
            if expires - datetime.datetime.now(datetime.UTC) < RENEW_BEFORE / 2:
                log.warning("webhook certificate expires %s: restarting to renew it", expires)
                os.kill(os.getpid(), signal.SIGTERM)
                return

    threading.Thread(target=watch, name="webhook-certificate", daemon=True).start()
