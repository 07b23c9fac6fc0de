"""librdkafka settings in the Java client's words, for Spark's Kafka reader and sink:
every setting translated or refused by name, never silently dropped."""

from __future__ import annotations

import pytest

from onceflow.logic.java_kafka import UntranslatableKafkaSettingError, java_kafka_settings

FILES = {"/k/client.crt": "CERT", "/k/client.key": "KEY"}


def test_sasl_scram_over_tls_becomes_a_jaas_line_and_a_pem_truststore() -> None:
    java = java_kafka_settings(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": "onceflow",
            "sasl.password": 'pa"ss\\word',
            "ssl.ca.location": "/k/ca.crt",
        },
        FILES.__getitem__,
    )
    assert java == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
        'required username="onceflow" password="pa\\"ss\\\\word";',
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/k/ca.crt",
    }


def test_an_inline_ca_becomes_inline_truststore_certificates() -> None:
    java = java_kafka_settings({"ssl.ca.pem": "-----BEGIN CERTIFICATE-----"}, FILES.__getitem__)
    assert java == {
        "ssl.truststore.type": "PEM",
        "ssl.truststore.certificates": "-----BEGIN CERTIFICATE-----",
    }


def test_a_client_certificate_goes_inline_as_a_pem_keystore() -> None:
    java = java_kafka_settings(
        {
            "security.protocol": "SSL",
            "ssl.certificate.location": "/k/client.crt",
            "ssl.key.location": "/k/client.key",
        },
        FILES.__getitem__,
    )
    assert java["ssl.keystore.type"] == "PEM"
    assert (java["ssl.keystore.certificate.chain"], java["ssl.keystore.key"]) == ("CERT", "KEY")


def test_an_inline_client_certificate_stays_inline() -> None:
    java = java_kafka_settings(
        {"ssl.certificate.pem": "CERT-PEM", "ssl.key.pem": "KEY-PEM"}, FILES.__getitem__
    )
    assert java["ssl.keystore.type"] == "PEM"
    assert java["ssl.keystore.certificate.chain"] == "CERT-PEM"
    assert java["ssl.keystore.key"] == "KEY-PEM"


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"sasl.kerberos.keytab": "/k/keytab"}, "sasl.kerberos.keytab"),
        ({"sasl.mechanism": "OAUTHBEARER", "sasl.username": "u"}, "OAUTHBEARER"),
        ({"ssl.certificate.location": "/k/client.crt"}, "ssl.key.location"),
        ({"ssl.ca.location": "/k/ca.crt", "ssl.ca.pem": "PEM"}, "keep one"),
        ({"ssl.key.pem": "KEY"}, "ssl.certificate.pem"),
        (
            {"ssl.certificate.pem": "C", "ssl.key.pem": "K", "ssl.key.location": "/k/x"},
            "keep one",
        ),
    ],
)
def test_what_cannot_be_translated_is_refused_by_name(settings: dict[str, str], named: str) -> None:
    with pytest.raises(UntranslatableKafkaSettingError, match=named):
        java_kafka_settings(settings, FILES.__getitem__)
