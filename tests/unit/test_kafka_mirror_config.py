"""The ``kafka`` connector's planning: config refused by name, and every source
partition owned by exactly one task whatever the task count."""

from __future__ import annotations

from typing import Any

import pytest

from onceflow.api.connector import KafkaRead
from onceflow.connectors.kafka_mirror import KafkaMirrorConnector, owner_task

VALID = {"topics": ["orders"], "bootstrapServers": "other:9092"}


@pytest.mark.parametrize(
    ("config", "field", "words"),
    [
        ({"topics": []}, "topics", "non-empty list"),
        ({"topics": ["a", "a"]}, "topics", "distinct"),
        ({"bootstrapServers": ""}, "bootstrapServers", "host:port"),
        ({"keepPartition": "yes"}, "keepPartition", "true or false"),
        ({"topics": ["a", "b"], "keepPartition": True}, "keepPartition", "one source topic"),
        ({"startingTimestampMs": "now"}, "startingTimestampMs", "epoch milliseconds"),
        ({"batchSize": 0}, "batchSize", ">= 1"),
        ({"metadataRefreshMs": 10}, "metadataRefreshMs", ">= 1000"),
        ({"groupId": "x"}, "groupId", "unknown setting"),
    ],
)
def test_a_config_the_mirror_cannot_run_is_refused_naming_the_setting(
    config: dict[str, Any], field: str, words: str
) -> None:
    problems = KafkaMirrorConnector().validate({**VALID, **config})
    assert [p.field for p in problems] == [field]
    assert words in problems[0].message


def test_a_valid_config_plans_one_config_per_task_and_declares_exactly_once() -> None:
    connector = KafkaMirrorConnector()
    assert connector.validate(VALID) == []
    configs = connector.task_configs(VALID, 3)
    assert [c["taskCount"] for c in configs] == [3, 3, 3]
    assert connector.task_configs(VALID, 3) == configs, "deterministic"
    assert connector.exactly_once_support(VALID)
    assert not connector.can_define_transaction_boundaries(VALID)


@pytest.mark.parametrize("tasks", [1, 2, 3, 7])
def test_every_partition_has_exactly_one_owner_and_owners_are_spread(tasks: int) -> None:
    owners = {(t, p): owner_task(t, p, tasks) for t in ("a", "b", "orders") for p in range(12)}
    assert set(owners.values()) == set(range(tasks))
    assert all(0 <= owner < tasks for owner in owners.values())


@pytest.mark.parametrize(
    ("config", "reads"),
    [
        (
            {"topics": ["a", "b"], "bootstrapServers": "other:9092"},
            [KafkaRead("a", "other:9092", "topics[0]"), KafkaRead("b", "other:9092", "topics[1]")],
        ),
        # What validate refuses reads nothing, or what it names well.
        ({"topics": ["a", 3, ""], "bootstrapServers": "o"}, [KafkaRead("a", "o", "topics[0]")]),
        ({"topics": "a", "bootstrapServers": "other:9092"}, []),
        ({"topics": ["a"], "bootstrapServers": " "}, []),
        ({"topics": ["a"]}, []),
        ({}, []),
    ],
)
def test_the_mirror_declares_the_topics_it_reads_and_their_cluster(
    config: dict[str, Any], reads: list[KafkaRead]
) -> None:
    assert KafkaMirrorConnector().kafka_reads(config) == reads
