"""Every field that names a topic takes only names Kafka accepts, refused with the rule
in words (newcomer rows 05 and 39: accepted, then the task or driver crash-looped),
and the CRD schema refuses the same names."""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest

from onceflow.api import InvalidResourceError, parse_resources
from onceflow.api.crd import crd_documents
from onceflow.api.kafka_topics import TOPIC_PATTERN, topic_name_problem

LEGAL = ["orders", "orders.raw", "a_b-c.D9", "...", "a" * 249, "-", "_", ".a", "a.."]
LEGAL += ["_a", "_.", "a__b", ".__a", "-__"]
ILLEGAL = ["", ".", "..", "a" * 250, "nfx05 bad/topic*", "ä", "a:b", "a,b", "tab\t"]
ILLEGAL += ["__", "__consumer_offsets", "__transaction_state", "___a", "__.x"]


@pytest.mark.parametrize("name", LEGAL)
def test_names_kafka_accepts_pass(name: str) -> None:
    assert topic_name_problem(name) is None
    assert re.match(TOPIC_PATTERN, name) and 1 <= len(name) <= 249


@pytest.mark.parametrize("name", ILLEGAL)
def test_names_kafka_refuses_are_refused_with_the_rule(name: str) -> None:
    assert topic_name_problem(name)
    assert not (re.match(TOPIC_PATTERN, name) and 1 <= len(name) <= 249), "the schema agrees"


def test_the_refusal_names_the_characters_kafka_refuses() -> None:
    assert topic_name_problem("nfx05 bad/topic*") == (
        "'nfx05 bad/topic*' has ' ', '*', '/'; a Kafka topic name has only ASCII letters, "
        "digits, '.', '_' and '-', at most 249 characters, not '.' or '..', not beginning "
        "with '__'"
    )


def test_kafkas_internal_topics_are_refused_saying_what_they_are() -> None:
    assert topic_name_problem("__consumer_offsets") == (
        "'__consumer_offsets' begins with '__' like Kafka's internal topics "
        "(__consumer_offsets, __transaction_state), which hold the cluster's group offsets "
        "and transactions, not records; choose a name that does not"
    )


@pytest.mark.parametrize("length", range(7))
def test_the_schema_pattern_and_the_rule_agree_on_every_short_name(length: int) -> None:
    """Every name of up to six characters from the ones the rules turn on."""
    for characters in itertools.product("a._-", repeat=length):
        name = "".join(characters)
        by_pattern = bool(re.match(TOPIC_PATTERN, name))
        assert by_pattern is (topic_name_problem(name) is None), name


def _documents(source: dict[str, Any], job_input: list[str], sink: str) -> list[dict[str, Any]]:
    meta = {"apiVersion": "onceflow.io/v1alpha1"}
    return [
        {
            **meta,
            "kind": "KafkaSource",
            "metadata": {"name": "s"},
            "spec": {"pipeline": "p", "connector": {"type": "sequence"}, **source},
        },
        {
            **meta,
            "kind": "SparkJob",
            "metadata": {"name": "j"},
            "spec": {
                "pipeline": "p",
                "input": {"topics": job_input},
                "transform": {"sql": "SELECT key, value FROM input"},
                "sink": {"kafka": {"topic": sink, "partitions": 1}},
                "checkpoint": {"path": "/tmp/j"},
            },
        },
    ]


def test_every_topic_field_of_every_resource_is_checked_and_reported_at_once() -> None:
    documents = _documents({"topic": "bad topic", "offsetsTopic": ".."}, ["", "ok", "."], "x/y")
    with pytest.raises(InvalidResourceError) as refused:
        parse_resources(documents)
    assert [p.field for p in refused.value.problems] == [
        "KafkaSource 's': spec.topic",
        "KafkaSource 's': spec.offsetsTopic",
        "SparkJob 'j': spec.input.topics[0]",
        "SparkJob 'j': spec.input.topics[2]",
        "SparkJob 'j': spec.sink.kafka.topic",
    ]
    assert refused.value.resource == "manifests"


@pytest.mark.parametrize(
    ("crd", "path"),
    [
        ("kafkasources.onceflow.io.yaml", ("topic",)),
        ("kafkasources.onceflow.io.yaml", ("offsetsTopic",)),
        ("sparkjobs.onceflow.io.yaml", ("input", "topics", "items")),
        ("sparkjobs.onceflow.io.yaml", ("sink", "kafka", "topic")),
    ],
)
def test_the_crd_schema_refuses_the_same_names(crd: str, path: tuple[str, ...]) -> None:
    schema = crd_documents()[crd]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    node = schema["properties"]["spec"]
    for part in path:
        node = node["items"] if part == "items" else node["properties"][part]
    assert (node["pattern"], node["minLength"], node["maxLength"]) == (TOPIC_PATTERN, 1, 249)
