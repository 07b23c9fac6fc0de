"""A Pipeline's Kafka client settings in the Java client's words.

The auth Secret holds librdkafka settings (what Onceflow's Python producers and the
exactly-once sink use). Spark's Kafka reader and built-in sink are the Java client,
which names the same things differently (`sasl.username` + `sasl.password` are one
JAAS line; a PEM CA file is a truststore of type PEM), and silently ignores names it
does not know -- so an untranslated setting would mean an unauthenticated reader. A
setting this module cannot translate is an error naming it, never dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

SAME_NAME = frozenset(
    {
        "security.protocol",
        "sasl.mechanism",
        "ssl.endpoint.identification.algorithm",
        "ssl.key.password",
        "client.id",
    }
)
ALIASES = {"sasl.mechanisms": "sasl.mechanism"}
LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
HANDLED = frozenset(
    {
        "sasl.username",
        "sasl.password",
        "ssl.ca.location",
        "ssl.ca.pem",
        "ssl.certificate.location",
        "ssl.key.location",
        "ssl.certificate.pem",
        "ssl.key.pem",
    }
)

ReadFile = Callable[[str], str]


class UntranslatableKafkaSettingError(ValueError):
    """A librdkafka setting with no Java counterpart Onceflow knows."""


def java_kafka_settings(librdkafka: Mapping[str, str], read_file: ReadFile) -> dict[str, str]:
    """The Java client's settings for ``librdkafka``'s. ``read_file`` gives a PEM file's
    text: Java takes a client certificate and key inline, not as two paths."""
    settings = {ALIASES.get(k, k): v for k, v in librdkafka.items()}
    unknown = sorted(settings.keys() - SAME_NAME - HANDLED)
    if unknown:
        raise UntranslatableKafkaSettingError(
            f"Kafka setting(s) {', '.join(unknown)} of the Pipeline's auth Secret have no "
            f"Java client translation for Spark jobs; supported: "
            f"{', '.join(sorted(SAME_NAME | HANDLED | ALIASES.keys()))}"
        )
    java = {k: v for k, v in settings.items() if k in SAME_NAME}
    if "sasl.username" in settings or "sasl.password" in settings:
        java["sasl.jaas.config"] = _jaas(settings)
    if "ssl.ca.location" in settings and "ssl.ca.pem" in settings:
        raise UntranslatableKafkaSettingError(
            "ssl.ca.location and ssl.ca.pem both name the CA: keep one (ssl.ca.pem also "
            "works for the operator, which mounts no file)"
        )
    if "ssl.ca.location" in settings:
        java["ssl.truststore.type"] = "PEM"
        java["ssl.truststore.location"] = settings["ssl.ca.location"]
    if "ssl.ca.pem" in settings:
        java["ssl.truststore.type"] = "PEM"
        java["ssl.truststore.certificates"] = settings["ssl.ca.pem"]
    java.update(_client_certificate(settings, read_file))
    return java


def _client_certificate(settings: Mapping[str, str], read_file: ReadFile) -> dict[str, str]:
    """The client certificate and key, inline (``*.pem``, what a Secret holds) or from
    files (``*.location``), as a PEM keystore."""
    if {"ssl.certificate.pem", "ssl.key.pem"} & settings.keys() and {
        "ssl.certificate.location",
        "ssl.key.location",
    } & settings.keys():
        raise UntranslatableKafkaSettingError(
            "the client certificate is given both inline (*.pem) and as files "
            "(*.location): keep one"
        )
    for form, take in (("pem", lambda value: value), ("location", read_file)):
        certificate, key = f"ssl.certificate.{form}", f"ssl.key.{form}"
        if certificate not in settings and key not in settings:
            continue
        if not (certificate in settings and key in settings):
            raise UntranslatableKafkaSettingError(
                f"{certificate} and {key} go together (a client certificate needs its key)"
            )
        return {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.certificate.chain": take(settings[certificate]),
            "ssl.keystore.key": take(settings[key]),
        }
    return {}


def _jaas(settings: Mapping[str, str]) -> str:
    mechanism = settings.get("sasl.mechanism", "GSSAPI")
    module = LOGIN_MODULES.get(mechanism)
    if module is None:
        raise UntranslatableKafkaSettingError(
            f"sasl.mechanism {mechanism!r} with a username and password: Spark jobs "
            f"support {', '.join(LOGIN_MODULES)}"
        )
    username = _quoted(settings.get("sasl.username", ""))
    password = _quoted(settings.get("sasl.password", ""))
    return f"{module} required username={username} password={password};"


def _quoted(value: str) -> str:
    """A JAAS option value: double-quoted, with quotes and backslashes escaped."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'
