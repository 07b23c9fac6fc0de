"""Which Kafka client settings a tenant's auth Secret may give the operator.

The operator fences transactional ids and reads offsets with the Pipeline's Secret
inside its own process, which holds the operator's credentials. librdkafka takes
much more than credentials from its settings: it loads a shared library named by
``plugin.library.paths`` or ``ssl.engine.location``, reads any file a ``*.location``
key names, calls whatever URL is the OIDC token endpoint, and a build with Kerberos
runs ``sasl.kerberos.kinit.cmd``. So a Secret is read as data: only the settings that
say how to authenticate are taken, and a platform admin may accept more by name
(chart value ``tenants.kafkaSecretKeys``) for a cluster that needs them.
"""

from __future__ import annotations

from collections.abc import Mapping

ACCEPTED_SECRET_KEYS = frozenset(
    {
        "security.protocol",
        "sasl.mechanism",
        "sasl.mechanisms",
        "sasl.username",
        "sasl.password",
        "ssl.ca.pem",
        "ssl.certificate.pem",
        "ssl.key.pem",
        "ssl.key.password",
        "ssl.endpoint.identification.algorithm",
        "client.id",
    }
)


def refused_secret_keys(settings: Mapping[str, str], extra_accepted: frozenset[str]) -> list[str]:
    """The Secret's keys the operator does not pass to its Kafka clients, sorted."""
    return sorted(settings.keys() - ACCEPTED_SECRET_KEYS - extra_accepted)


def refusal_message(
    secret: str, refused: list[str], field: str = "spec.kafka.authSecretRef"
) -> str:
    """Names the field, the keys, what is accepted, and who can widen it."""
    return (
        f"{field}: Secret {secret!r} has Kafka setting(s) "
        f"{', '.join(map(repr, refused))} the operator does not accept from a Secret; "
        f"remove them (accepted: {', '.join(sorted(ACCEPTED_SECRET_KEYS))}), or have the "
        "platform admin accept them by name (chart value tenants.kafkaSecretKeys)"
    )
