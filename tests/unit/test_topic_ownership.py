"""The pipeline graph: on one Kafka cluster every topic Onceflow writes has one writer
in one role, every transactional id one workload, and no job reads its own output;
problems name the resources of the tenant's own namespace only."""

from __future__ import annotations

from typing import Any

import pytest

from onceflow.api import parse_resources
from onceflow.api.manifests import ResourceRef
from onceflow.logic.topic_ownership import (
    DUPLICATE_RESOURCE,
    INVALID_TOPIC_NAME,
    PIPELINE_CYCLE,
    TOPIC_CONFLICT,
    TRANSACTIONAL_ID_CONFLICT,
    Collision,
    find_collisions,
    manifest_problems,
)

Document = dict[str, Any]


def _resource(kind: str, name: str, namespace: str, spec: Document) -> Document:
    return {
        "apiVersion": "onceflow.io/v1alpha1",
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def pipeline(ns: str = "default", bootstrap: str = "kafka:9092", **spec: Any) -> Document:
    return _resource("Pipeline", "p", ns, {"kafka": {"bootstrapServers": bootstrap}, **spec})


def source(name: str, topic: str, ns: str = "default", **spec: Any) -> Document:
    connector = {"type": "sequence"}
    return _resource(
        "KafkaSource", name, ns, {"pipeline": "p", "topic": topic, "connector": connector, **spec}
    )


def job(
    name: str,
    sink: str | None,
    topics: list[str] | None = None,
    sources: list[str] | None = None,
    ns: str = "default",
    delivery: str = "exactlyOnce",
) -> Document:
    inputs = {"topics": topics} if topics is not None else {"sources": sources}
    kafka = {"kafka": {"topic": sink, "partitions": 2, "delivery": delivery}}
    return _resource(
        "SparkJob",
        name,
        ns,
        {
            "pipeline": "p",
            "input": inputs,
            "transform": {"sql": "SELECT key, value FROM input"},
            "sink": kafka if sink else {"files": {"path": "/tmp/out"}},
            "checkpoint": {"path": f"/tmp/{name}"},
        },
    )


def collisions(*documents: Document, bootstrap_override: str | None = None) -> list[Collision]:
    return find_collisions(parse_resources(documents), bootstrap_override=bootstrap_override)


def summary(found: list[Collision]) -> list[tuple[str, str, str]]:
    return [(c.resource.label, c.problem.field, c.problem.reason) for c in found]


REFUSED: list[tuple[str, list[Document], list[tuple[str, str, str]], str]] = [
    (
        "two sources write one topic (newcomer row 09)",
        [pipeline(), source("a", "t"), source("b", "t")],
        [
            ("KafkaSource 'a'", "spec.topic", TOPIC_CONFLICT),
            ("KafkaSource 'b'", "spec.topic", TOPIC_CONFLICT),
        ],
        "topic 't' is also the output topic of KafkaSource 'b' (spec.topic): two writers of "
        "one topic mix their records",
    ),
    (
        "a source writes into another's offsets topic (row 12b)",
        [pipeline(), source("a", "t"), source("b", "default.p-a-offsets")],
        [
            ("KafkaSource 'a'", "spec.offsetsTopic", TOPIC_CONFLICT),
            ("KafkaSource 'b'", "spec.topic", TOPIC_CONFLICT),
        ],
        "topic 'default.p-a-offsets' is also the offsets topic of KafkaSource 'a' "
        "(spec.offsetsTopic): an offsets topic holds one source's offsets and nothing else",
    ),
    (
        "a job's sink writes into a source's explicit offsets topic",
        [pipeline(), source("a", "t", offsetsTopic="a.offsets"), job("j", "a.offsets", ["t"])],
        [
            ("KafkaSource 'a'", "spec.offsetsTopic", TOPIC_CONFLICT),
            ("SparkJob 'j'", "spec.sink.kafka.topic", TOPIC_CONFLICT),
        ],
        "topic 'a.offsets' is also the offsets topic of KafkaSource 'a' (spec.offsetsTopic)",
    ),
    (
        "a source writes into a job's marker topic",
        [pipeline(), source("a", "default.p-j-sink-markers"), job("j", "out", ["x"])],
        [
            ("KafkaSource 'a'", "spec.topic", TOPIC_CONFLICT),
            ("SparkJob 'j'", "spec.sink.kafka", TOPIC_CONFLICT),
        ],
        "a marker topic holds one sink's batch markers and nothing else",
    ),
    (
        "two sources share an offsets topic",
        [pipeline(), source("a", "ta", offsetsTopic="o"), source("b", "tb", offsetsTopic="o")],
        [
            ("KafkaSource 'a'", "spec.offsetsTopic", TOPIC_CONFLICT),
            ("KafkaSource 'b'", "spec.offsetsTopic", TOPIC_CONFLICT),
        ],
        "topic 'o' is also the offsets topic of KafkaSource 'b' (spec.offsetsTopic)",
    ),
    (
        "a source's offsets topic is its own output topic",
        [pipeline(), source("a", "t", offsetsTopic="t")],
        [("KafkaSource 'a'", "spec.topic", TOPIC_CONFLICT)],
        "topic 't' is also the offsets topic of this KafkaSource (spec.offsetsTopic)",
    ),
    (
        "a job's sink topic is its input (row 11)",
        [pipeline(), source("a", "t"), job("j", "o", ["t", "o"])],
        [("SparkJob 'j'", "spec.sink.kafka.topic", PIPELINE_CYCLE)],
        "topic 'o' is also this job's input (spec.input.topics[1]): each batch reads the "
        "job's own output again",
    ),
    (
        "a job writes the topic of the source it reads: two writers and a loop",
        [pipeline(), source("a", "t"), job("j", "t", sources=["a"])],
        [
            ("KafkaSource 'a'", "spec.topic", TOPIC_CONFLICT),
            ("SparkJob 'j'", "spec.sink.kafka.topic", TOPIC_CONFLICT),
            ("SparkJob 'j'", "spec.sink.kafka.topic", PIPELINE_CYCLE),
        ],
        "topic 't' is also this job's input (spec.input.sources[0])",
    ),
    (
        "an at-least-once sink loops too",
        [pipeline(), job("j", "o", ["o"], delivery="atLeastOnce")],
        [("SparkJob 'j'", "spec.sink.kafka.topic", PIPELINE_CYCLE)],
        "topic 'o' is also this job's input (spec.input.topics[0])",
    ),
    (
        "a cycle through two jobs",
        [pipeline(), job("j", "x", ["y"]), job("k", "y", ["x"])],
        [
            ("SparkJob 'j'", "spec.sink.kafka.topic", PIPELINE_CYCLE),
            ("SparkJob 'k'", "spec.sink.kafka.topic", PIPELINE_CYCLE),
        ],
        "topic 'x' is read by SparkJob 'k', which writes 'y', read by this job "
        "(spec.input.topics[0]): records go round this cycle without end",
    ),
    (
        "a cycle through three jobs, one outside it feeding in",
        [
            pipeline(),
            source("s", "in"),
            job("j", "x", ["in", "z"]),
            job("k", "y", ["x"]),
            job("l", "z", ["y"]),
        ],
        [
            ("SparkJob 'j'", "spec.sink.kafka.topic", PIPELINE_CYCLE),
            ("SparkJob 'k'", "spec.sink.kafka.topic", PIPELINE_CYCLE),
            ("SparkJob 'l'", "spec.sink.kafka.topic", PIPELINE_CYCLE),
        ],
        "topic 'x' is read by SparkJob 'k', which writes 'y', read by SparkJob 'l', which "
        "writes 'z', read by this job (spec.input.topics[1])",
    ),
    (
        "two KafkaSources of one name in one file (row 13)",
        [pipeline(), source("a", "t1"), source("a", "t2")],
        [("KafkaSource 'a'", "metadata.name", DUPLICATE_RESOURCE)],
        "2 KafkaSources are named 'a' in this namespace",
    ),
    (
        "two Pipelines of one name in one file",
        [pipeline(), pipeline(), source("a", "t")],
        [("Pipeline 'p'", "metadata.name", DUPLICATE_RESOURCE)],
        "2 Pipelines are named 'p' in this namespace",
    ),
    (
        "topics differing only in '.' and '_'",
        [pipeline(), source("a", "x.y"), source("b", "x_y")],
        [
            ("KafkaSource 'a'", "spec.topic", TOPIC_CONFLICT),
            ("KafkaSource 'b'", "spec.topic", TOPIC_CONFLICT),
        ],
        "topic 'x.y' differs from 'x_y' (output topic of KafkaSource 'b') only in '.' and '_'",
    ),
    (
        "a prefix that makes the default offsets and marker topics illegal",
        [pipeline(transactionalIdPrefix="team/a"), source("a", "t"), job("j", "o", ["t"])],
        [
            ("KafkaSource 'a'", "spec.offsetsTopic", INVALID_TOPIC_NAME),
            ("SparkJob 'j'", "spec.sink.kafka", INVALID_TOPIC_NAME),
        ],
        "the offsets topic is named <transactionalIdPrefix>-<source>-offsets, and Kafka "
        "refuses this one: 'team/a-a-offsets' has '/'",
    ),
]


@pytest.mark.parametrize(
    ("documents", "expected", "message"),
    [case[1:] for case in REFUSED],
    ids=[case[0] for case in REFUSED],
)
def test_a_graph_that_damages_data_is_refused_naming_both_resources_and_the_field(
    documents: list[Document], expected: list[tuple[str, str, str]], message: str
) -> None:
    found = collisions(*documents)
    assert summary(found) == expected
    assert any(message in c.problem.message for c in found), [str(c.problem) for c in found]


ACCEPTED: list[tuple[str, list[Document], str | None]] = [
    (
        "a job reads a source's topic",
        [pipeline(), source("a", "t"), job("j", "out", sources=["a"])],
        None,
    ),
    (
        "two jobs read one topic, and a third reads both their outputs",
        [
            pipeline(),
            source("a", "t"),
            job("j", "x", ["t"]),
            job("k", "y", ["t"]),
            job("l", "z", ["x", "y"]),
        ],
        None,
    ),
    (
        "a job reads a topic nothing of Onceflow writes, and writes files",
        [pipeline(), job("j", None, ["external"])],
        None,
    ),
    (
        "two namespaces on different clusters use one topic name and one prefix",
        [
            pipeline("a", "kafka-a:9092", transactionalIdPrefix="shop"),
            pipeline("b", "kafka-b:9092", transactionalIdPrefix="shop"),
            source("s", "orders", "a"),
            source("s", "orders", "b"),
        ],
        None,
    ),
    (
        "one name in two namespaces, each with its own default prefix",
        [pipeline("a"), pipeline("b"), source("s", "a.orders", "a"), source("s", "b.orders", "b")],
        None,
    ),
    (
        "two Pipelines of one namespace share a prefix (names are unique per namespace)",
        [
            pipeline(transactionalIdPrefix="shop"),
            _resource(
                "Pipeline",
                "q",
                "default",
                {"kafka": {"bootstrapServers": "kafka:9092"}, "transactionalIdPrefix": "shop"},
            ),
            source("a", "t"),
        ],
        None,
    ),
    (
        "the same names in the same namespace under --bootstrap, once each",
        [pipeline(), source("a", "t"), job("j", "out", ["t"])],
        "127.0.0.1:9092",
    ),
    (
        "a workload whose Pipeline is missing is the resolver's to report",
        [source("a", "t"), source("b", "t")],
        None,
    ),
]


@pytest.mark.parametrize(
    ("documents", "bootstrap"), [case[1:] for case in ACCEPTED], ids=[c[0] for c in ACCEPTED]
)
def test_a_pipeline_graph_without_collisions_passes(
    documents: list[Document], bootstrap: str | None
) -> None:
    assert collisions(*documents, bootstrap_override=bootstrap) == []


def _tenants(bootstrap_b: str = "kafka:9092", prefix_b: str | None = None) -> list[Document]:
    spec_b = {"transactionalIdPrefix": prefix_b} if prefix_b else {}
    return [
        pipeline("team-a", "kafka:9092", transactionalIdPrefix="shared"),
        pipeline("team-b", bootstrap_b, **spec_b),
        source("orders-a", "orders", "team-a"),
        source("secret-name", "orders", "team-b"),
    ]


def test_across_namespaces_the_message_says_another_namespace_and_names_nobody() -> None:
    found = collisions(*_tenants())
    mine = [c for c in found if c.resource.namespace == "team-a"]
    assert summary(mine) == [
        ("KafkaSource 'orders-a' in namespace 'team-a'", "spec.topic", TOPIC_CONFLICT)
    ]
    (collision,) = mine
    message = str(collision.problem)
    assert "topic 'orders' belongs to another namespace on this Kafka cluster" in message
    assert "team-b" not in message and "secret-name" not in message
    assert collision.others == (ResourceRef("KafkaSource", "team-b", "secret-name"),)
    assert "KafkaSource team-a/orders-a" in collision.log_message
    assert "KafkaSource team-b/secret-name" in collision.log_message, (
        "the operator's log names both"
    )


def test_a_shared_prefix_across_namespaces_is_refused_on_the_pipeline_and_the_workloads() -> None:
    """Newcomer row 40: both sources got nfx40/source/src/0 and one offsets topic."""
    documents = [
        pipeline("team-a", transactionalIdPrefix="nfx40"),
        pipeline("team-b", transactionalIdPrefix="nfx40"),
        source("src", "a.t", "team-a"),
        source("src", "b.t", "team-b"),
    ]
    found = [c for c in collisions(*documents) if c.resource.namespace == "team-a"]
    assert summary(found) == [
        (
            "Pipeline 'p' in namespace 'team-a'",
            "spec.transactionalIdPrefix",
            TRANSACTIONAL_ID_CONFLICT,
        ),
        ("KafkaSource 'src' in namespace 'team-a'", "spec.offsetsTopic", TOPIC_CONFLICT),
        ("KafkaSource 'src' in namespace 'team-a'", "spec.pipeline", TRANSACTIONAL_ID_CONFLICT),
    ]
    ids = found[2].problem.message
    assert ids.startswith(
        "its producers' transactional ids (nfx40/source/src/<n>) belong to another namespace"
    )
    assert "give Pipeline 'p' a spec.transactionalIdPrefix of its own" in ids
    assert all("team-b" not in str(c.problem) for c in found)


def test_sink_producers_collide_like_source_tasks() -> None:
    documents = [
        pipeline("team-a", transactionalIdPrefix="x"),
        pipeline("team-b", transactionalIdPrefix="x"),
        job("j", "a.out", ["in"], ns="team-a"),
        job("j", "b.out", ["in"], ns="team-b"),
    ]
    reasons = {(c.resource.namespace, c.problem.field) for c in collisions(*documents)}
    assert ("team-a", "spec.pipeline") in reasons, "x/sink/j/<n> in both namespaces"
    assert ("team-a", "spec.sink.kafka") in reasons, "and one marker topic x-j-sink-markers"


@pytest.mark.parametrize(
    ("bootstrap_b", "same_cluster"),
    [
        ("kafka:9092", True),
        ("KAFKA:9092", True),
        ("PLAINTEXT://kafka:9092", True),
        ("kafka", True),  # Kafka's default port
        ("other:9092, kafka:9092", True),  # one shared broker: one cluster
        ("kafka:9093", False),
        ("other:9092", False),
    ],
)
def test_clusters_are_told_apart_by_their_bootstrap_brokers(
    bootstrap_b: str, same_cluster: bool
) -> None:
    assert bool(collisions(*_tenants(bootstrap_b, prefix_b="b"))) is same_cluster


def test_bootstrap_override_puts_every_pipeline_on_one_cluster() -> None:
    """``onceflow run --bootstrap`` sends every Pipeline to one broker."""
    documents = _tenants("elsewhere:9092", prefix_b="b")
    assert collisions(*documents) == []
    assert collisions(*documents, bootstrap_override="127.0.0.1:9092") != []


def test_a_cycle_through_another_namespace_hides_that_namespaces_topics() -> None:
    documents = [
        pipeline("team-a"),
        pipeline("team-b"),
        job("j", "a.out", ["b.out"], ns="team-a"),
        job("k", "b.out", ["a.out"], ns="team-b"),
    ]
    mine = [c for c in collisions(*documents) if c.resource.namespace == "team-a"]
    assert [c.problem.message for c in mine] == [
        "topic 'a.out' is read by a job of another namespace on this Kafka cluster, which "
        "writes a topic, read by this job (spec.input.topics[0]): records go round this "
        "cycle without end; write to a topic no job of the cycle reads"
    ]
    assert mine[0].others == (ResourceRef("SparkJob", "team-b", "k"),)


def test_the_webhook_finds_an_incoming_objects_collisions_among_stored_ones() -> None:
    """The admission webhook's use: the incoming object with every stored object (its
    own stored version left out), keeping the collisions of the incoming object."""
    stored = parse_resources([pipeline(), source("a", "t"), job("j", "out", ["t"])])
    (incoming,) = parse_resources([source("b", "out")])
    found = find_collisions([*stored, incoming])
    mine = [c.problem for c in found if c.resource == ResourceRef.of(incoming)]
    assert [str(p) for p in mine] == [
        "spec.topic: topic 'out' is also the sink topic of SparkJob 'j' "
        "(spec.sink.kafka.topic): two writers of one topic mix their records, and its "
        "readers (and `onceflow audit`) see duplicates that no fault caused; give each its "
        "own topic"
    ]


def test_manifest_problems_label_each_problem_with_its_resource() -> None:
    resources = parse_resources([pipeline(), source("a", "t"), source("b", "t")])
    assert [p.field for p in manifest_problems(resources)] == [
        "KafkaSource 'a': spec.topic",
        "KafkaSource 'b': spec.topic",
    ]
