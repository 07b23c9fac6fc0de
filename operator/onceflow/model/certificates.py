"""The webhook's own certificate authority and serving certificate, made without I/O.

The operator keeps them in one Secret that every replica reads, so all replicas serve
the same certificate and the API server's ``caBundle`` (the CA) stays valid across
renewals: only the serving certificate is renewed, by the same CA. Nothing here is
rendered by Helm, so ``helm template`` gives the same output every time (Argo CD).
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

CA_VALIDITY = datetime.timedelta(days=3650)
SERVING_VALIDITY = datetime.timedelta(days=365)
RENEW_BEFORE = datetime.timedelta(days=60)
"""A serving certificate this close to expiry is renewed when an operator starts."""


@dataclass(frozen=True)
class WebhookCertificates:
    """PEM texts, as stored in the Secret (``ca.crt``, ``ca.key``, ``tls.crt``, ``tls.key``)."""

    ca_cert: str
    ca_key: str
    cert: str
    key: str

    def to_secret_data(self) -> dict[str, str]:
        return {
            "ca.crt": self.ca_cert,
            "ca.key": self.ca_key,
            "tls.crt": self.cert,
            "tls.key": self.key,
        }

    @classmethod
    def from_secret_data(cls, data: dict[str, str]) -> WebhookCertificates | None:
        keys = ("ca.crt", "ca.key", "tls.crt", "tls.key")
        if not all(data.get(k) for k in keys):
            return None
        return cls(*(data[k] for k in keys))


def _key_pem(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def new_authority(now: datetime.datetime) -> tuple[str, str]:
    """A CA certificate and key (PEM)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = _name("onceflow-webhook-ca")
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + CA_VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM).decode(), _key_pem(key)


def new_serving(
    ca_cert: str, ca_key: str, hosts: list[str], now: datetime.datetime
) -> WebhookCertificates:
    """A serving certificate for ``hosts`` signed by the given CA."""
    authority = x509.load_pem_x509_certificate(ca_cert.encode())
    authority_key = serialization.load_pem_private_key(ca_key.encode(), password=None)
    assert isinstance(authority_key, ec.EllipticCurvePrivateKey), "a CA made by new_authority"
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(hosts[0]))
        .issuer_name(authority.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + SERVING_VALIDITY)
        .add_extension(x509.SubjectAlternativeName(_subject_names(hosts)), critical=False)
        .add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
        .sign(authority_key, hashes.SHA256())
    )
    return WebhookCertificates(
        ca_cert, ca_key, cert.public_bytes(serialization.Encoding.PEM).decode(), _key_pem(key)
    )


def _subject_names(hosts: list[str]) -> list[x509.GeneralName]:
    """A host the API server calls by address (a local webhook URL) is an IP name."""
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


def new_certificates(hosts: list[str], now: datetime.datetime) -> WebhookCertificates:
    return new_serving(*new_authority(now), hosts, now)


def needs_renewal(stored: WebhookCertificates, hosts: list[str], now: datetime.datetime) -> bool:
    """The serving certificate expires soon or names other hosts (a renamed Service)."""
    cert = x509.load_pem_x509_certificate(stored.cert.encode())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    named = [*names.get_values_for_type(x509.DNSName)]
    named += [str(a) for a in names.get_values_for_type(x509.IPAddress)]
    return cert.not_valid_after_utc - now < RENEW_BEFORE or sorted(named) != sorted(hosts)
