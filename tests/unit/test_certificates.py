"""The webhook's own certificates: a serving certificate the CA signed for exactly the
hosts asked for, renewed near its end or when the hosts change, by the same CA."""

from __future__ import annotations

import datetime

from cryptography import x509

from onceflow.model.certificates import (
    SERVING_VALIDITY,
    WebhookCertificates,
    needs_renewal,
    new_certificates,
    new_serving,
)

NOW = datetime.datetime(2026, 11, 23, tzinfo=datetime.UTC)
HOSTS = ["onceflow-webhook.system.svc", "onceflow-webhook.system.svc.cluster.local"]


def test_the_serving_certificate_is_signed_by_the_ca_for_the_hosts() -> None:
    made = new_certificates([*HOSTS, "127.0.0.1"], NOW)
    cert = x509.load_pem_x509_certificate(made.cert.encode())
    ca = x509.load_pem_x509_certificate(made.ca_cert.encode())
    cert.verify_directly_issued_by(ca)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == HOSTS
    assert [str(a) for a in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert WebhookCertificates.from_secret_data(made.to_secret_data()) == made


def test_renewal_near_the_end_or_for_other_hosts_keeps_the_ca() -> None:
    made = new_certificates(HOSTS, NOW)
    assert not needs_renewal(made, HOSTS, NOW)
    assert not needs_renewal(made, list(reversed(HOSTS)), NOW), "order does not matter"
    assert needs_renewal(made, HOSTS[:1], NOW), "a renamed Service"
    assert needs_renewal(made, HOSTS, NOW + SERVING_VALIDITY - datetime.timedelta(days=30))
    renewed = new_serving(made.ca_cert, made.ca_key, HOSTS, NOW)
    assert renewed.ca_cert == made.ca_cert and renewed.cert != made.cert


def test_a_secret_without_the_ca_key_is_not_ours() -> None:
    assert WebhookCertificates.from_secret_data({"tls.crt": "c", "tls.key": "k"}) is None
