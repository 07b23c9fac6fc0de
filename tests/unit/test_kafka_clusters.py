"""Kafka clusters are known by their bootstrap servers: spellings of one address are
one cluster, lists sharing an address are one cluster, and other addresses are not."""

from __future__ import annotations

import pytest

from onceflow.logic.kafka_clusters import cluster_keys


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("kafka:9092", "KAFKA:9092", True),
        ("kafka:9092", "PLAINTEXT://kafka", True),  # a protocol and Kafka's default port
        ("kafka.kafka.svc:9092", "kafka.kafka.svc.cluster.local:9092", True),
        ("kafka.kafka.svc:9092", "kafka.kafka.svc.cluster.local.:9092", True),
        ("kafka.kafka.svc", "SASL_SSL://Kafka.Kafka.svc.cluster.local.", True),
        ("kafka.kafka.svc:9092", "kafka.kafka.svc.corp.example:9092", True),  # any domain
        ("kafka.example.com.:9092", "kafka.example.com:9092", True),
        (
            "kafka-0.kafka-brokers.kafka.svc.cluster.local:9092",
            "kafka-0.kafka-brokers.kafka.svc:9092",
            True,
        ),
        ("kafka.kafka.svc:9092, kafka-1:9092", "kafka-1", True),  # a shared broker
        ("kafka.kafka.svc:9092", "kafka.other.svc:9092", False),  # another namespace
        ("kafka.kafka.svc:9092", "kafka.kafka.svc:9093", False),
        ("kafka-0.kafka-brokers.kafka.svc:9092", "kafka-brokers.kafka.svc:9092", False),
        # Not recognised: names completed by a pod's DNS search path, an IP address.
        ("kafka.kafka.svc:9092", "kafka.kafka:9092", False),
        ("kafka:9092", "10.0.0.7:9092", False),
    ],
)
def test_spellings_of_one_address_are_one_cluster(a: str, b: str, same: bool) -> None:
    keys = cluster_keys([a, b])
    assert (keys[a] == keys[b]) is same


def test_a_bootstrap_list_is_keyed_by_its_normal_spelling() -> None:
    assert cluster_keys(["Kafka.Kafka.svc.cluster.local."]) == {
        "Kafka.Kafka.svc.cluster.local.": "kafka.kafka.svc:9092"
    }
