"""The pipeline graph: on one Kafka cluster every topic Onceflow writes has one writer
in one role, every transactional id one workload, and no workload (a job, or a source
whose connector reads Kafka) reads its own output; problems name the resources of the
tenant's own namespace only."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from onceflow.api import parse_resources
from onceflow.api.manifests import ResourceRef
from onceflow.connectors.registry import load_connector
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


def mirror(
    name: str, topic: str, reads: list[str], ns: str = "default", bootstrap: str = "kafka:9092"
) -> Document:
    """A KafkaSource whose connector (the Kafka mirror) reads ``reads`` on ``bootstrap``."""
    config = {"topics": reads, "bootstrapServers": bootstrap}
    spec = {"pipeline": "p", "topic": topic, "connector": {"type": "kafka", "config": config}}
    return _resource("KafkaSource", name, ns, spec)


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
    return find_collisions(
        parse_resources(documents), connectors=load_connector, bootstrap_override=bootstrap_override
    )


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
        "a mirror reads its own output topic on its pipeline's cluster",
        [pipeline(), mirror("m", "t", ["t"], bootstrap="PLAINTEXT://KAFKA")],
        [("KafkaSource 'm'", "spec.topic", PIPELINE_CYCLE)],
        "topic 't' is also this source's input (spec.connector.config.topics[0]): each record "
        "the source writes is read and written again, and the topic grows without end; write "
        "to a topic the source does not read",
    ),
    (
        "a mirror reads its own offsets topic (offsets are written with every transaction)",
        [pipeline(), mirror("m", "t", ["elsewhere", "default.p-m-offsets"])],
        [("KafkaSource 'm'", "spec.offsetsTopic", PIPELINE_CYCLE)],
        "topic 'default.p-m-offsets' is also this source's input (spec.connector.config.topics[1])",
    ),
    (
        "a mirror copies a job's sink topic into the job's input topic",
        [pipeline(), mirror("m", "in", ["out"]), job("j", "out", ["in"])],
        [
            ("KafkaSource 'm'", "spec.topic", PIPELINE_CYCLE),
            ("SparkJob 'j'", "spec.sink.kafka.topic", PIPELINE_CYCLE),
        ],
        "topic 'in' is read by SparkJob 'j', which writes 'out', read by this source "
        "(spec.connector.config.topics[0]): records go round this cycle without end; write "
        "to a topic no workload of the cycle reads",
    ),
    (
        "the same cycle, told to the job, which reads the mirror by name",
        [pipeline(), mirror("m", "in", ["out"]), job("j", "out", sources=["m"])],
        [
            ("KafkaSource 'm'", "spec.topic", PIPELINE_CYCLE),
            ("SparkJob 'j'", "spec.sink.kafka.topic", PIPELINE_CYCLE),
        ],
        "topic 'out' is read by KafkaSource 'm', which writes 'in', read by this job "
        "(spec.input.sources[0])",
    ),
    (
        "a prefix that makes the default offsets topic one of Kafka's internal names",
        [pipeline(transactionalIdPrefix="__shop"), source("a", "t")],
        [("KafkaSource 'a'", "spec.offsetsTopic", INVALID_TOPIC_NAME)],
        "'__shop-a-offsets' begins with '__' like Kafka's internal topics",
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
        "a mirror copies a job's output into a topic the job does not read",
        [pipeline(), mirror("m", "copy", ["out"]), job("j", "out", ["in"])],
        None,
    ),
    (
        "a mirror reads a topic of its own name on another cluster",
        [pipeline(), mirror("m", "t", ["t"], bootstrap="kafka-dr:9092")],
        None,
    ),
    (
        "--bootstrap moves the Pipelines, not the cluster a mirror's config names",
        [pipeline(), mirror("m", "t", ["t"])],
        "127.0.0.1:9092",
    ),
    (
        "a connector that is not installed reads nothing here (the resolver reports it)",
        [
            pipeline(),
            _resource(
                "KafkaSource",
                "x",
                "default",
                {"pipeline": "p", "topic": "t", "connector": {"type": "not-installed"}},
            ),
        ],
        None,
    ),
    (
        "a job that only reads 'x.y' beside a source writing 'x_y' (reading creates nothing)",
        [pipeline(), source("a", "x_y"), job("j", None, ["x.y"])],
        None,
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
    assert (
        "topic 'orders' belongs to another namespace on this Kafka cluster (an output topic "
        "there)" in message
    )
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
        "its producers' transactional ids (nfx40/source/src/<n>) are also those of a source "
        "of another namespace on this Kafka cluster:"
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
        "cycle without end; write to a topic no workload of the cycle reads"
    ]
    assert mine[0].others == (ResourceRef("SparkJob", "team-b", "k"),)


def test_the_webhook_finds_an_incoming_objects_collisions_among_stored_ones() -> None:
    """The admission webhook's use: the incoming object with every stored object (its
    own stored version left out), keeping the collisions of the incoming object."""
    stored = parse_resources([pipeline(), source("a", "t"), job("j", "out", ["t"])])
    (incoming,) = parse_resources([source("b", "out")])
    found = find_collisions([*stored, incoming], connectors=load_connector)
    mine = [c.problem for c in found if c.resource == ResourceRef.of(incoming)]
    assert [str(p) for p in mine] == [
        "spec.topic: topic 'out' is also the sink topic of SparkJob 'j' "
        "(spec.sink.kafka.topic): two writers of one topic mix their records, and its "
        "readers (and `onceflow audit`) see duplicates that no fault caused; give each its "
        "own topic"
    ]


def test_manifest_problems_label_each_problem_with_its_resource() -> None:
    resources = parse_resources([pipeline(), source("a", "t"), source("b", "t")])
    assert [p.field for p in manifest_problems(resources, connectors=load_connector)] == [
        "KafkaSource 'a': spec.topic",
        "KafkaSource 'b': spec.topic",
    ]


def test_a_cycle_through_another_namespaces_mirror_names_neither_it_nor_its_topic() -> None:
    """team-b's mirror copies team-a's output back into team-a's input."""
    documents = [
        pipeline("team-a"),
        pipeline("team-b"),
        job("j", "a.out", ["a.in"], ns="team-a"),
        mirror("secret-mirror", "a.in", ["a.out"], ns="team-b"),
    ]
    found = collisions(*documents)
    assert summary(found) == [
        ("SparkJob 'j' in namespace 'team-a'", "spec.sink.kafka.topic", PIPELINE_CYCLE),
        ("KafkaSource 'secret-mirror' in namespace 'team-b'", "spec.topic", PIPELINE_CYCLE),
    ]
    assert found[0].problem.message == (
        "topic 'a.out' is read by a source of another namespace on this Kafka cluster, which "
        "writes a topic, read by this job (spec.input.topics[0]): records go round this "
        "cycle without end; write to a topic no workload of the cycle reads"
    )
    assert found[0].others == (ResourceRef("KafkaSource", "team-b", "secret-mirror"),)


def test_each_cycle_is_told_within_its_own_component() -> None:
    """Two loops joined one way (k feeds l): every job of both is in a loop, and each
    is shown a cycle of its own loop, not a walk through the other."""
    documents = [
        pipeline(),
        job("j", "x", ["y"]),
        job("k", "y", ["x"]),
        job("l", "z", ["w", "y"]),
        job("m", "w", ["z"]),
        job("n", "v", ["z"]),  # fed by the second loop, in none
    ]
    found = {c.resource.name: c for c in collisions(*documents)}
    assert sorted(found) == ["j", "k", "l", "m"]
    assert found["l"].others == (ResourceRef("SparkJob", "default", "m"),)
    assert found["l"].problem.message.startswith(
        "topic 'z' is read by SparkJob 'm', which writes 'w', read by this job "
        "(spec.input.topics[0])"
    )


def test_every_job_of_a_long_ring_is_told_the_whole_ring() -> None:
    ring = 300
    documents = [pipeline()] + [job(f"j{i}", f"t{i}", [f"t{(i - 1) % ring}"]) for i in range(ring)]
    found = collisions(*documents)
    assert len(found) == ring
    assert {c.problem.reason for c in found} == {PIPELINE_CYCLE}
    assert all(len(c.others) == ring - 1 for c in found)
    assert found[0].problem.message.startswith("topic 't0' is read by SparkJob 'j1', which")


def test_a_large_acyclic_graph_is_judged_in_one_pass() -> None:
    """A 2000-job chain and a 500-job DAG of 10 layers, each job reading all 50 of the
    layer before: 27,000 edges, no cycle. A search per job took seconds here; the
    components are found once (well under a second)."""
    chain = [job(f"c{i}", f"c{i}", [f"c{i - 1}" if i else "chain-in"]) for i in range(2000)]
    width = 50
    layers = [
        job(
            f"d{layer}-{i}",
            f"d{layer}-{i}",
            [f"d{layer - 1}-{k}" if layer else f"dag-in-{k}" for k in range(width)],
        )
        for layer in range(10)
        for i in range(width)
    ]
    resources = parse_resources([pipeline(), *chain, *layers])
    assert find_collisions(resources, connectors=load_connector) == []


def _reaches(reads: list[set[int]], start: int, goal: int) -> bool:
    """Whether job ``start``'s output reaches job ``goal`` (job i writes t<i> and reads
    t<k> for each k in ``reads[i]``), by walking every path."""
    seen, todo = set(), [start]
    while todo:
        writer = todo.pop()
        for reader, inputs in enumerate(reads):
            if writer in inputs and reader not in seen:
                seen.add(reader)
                todo.append(reader)
    return goal in seen


@settings(max_examples=200, deadline=None)  # timing is not what this checks
@given(st.lists(st.sets(st.integers(0, 7), max_size=3), min_size=1, max_size=8))
def test_exactly_the_jobs_on_a_cycle_are_reported_each_with_a_cycle_of_its_own(
    reads: list[set[int]],
) -> None:
    inputs = [[f"t{k}" for k in sorted(r)] or ["external"] for r in reads]
    documents = [job(f"j{i}", f"t{i}", topics) for i, topics in enumerate(inputs)]
    found = {int(c.resource.name[1:]): c for c in collisions(pipeline(), *documents)}
    assert set(found) == {i for i in range(len(reads)) if _reaches(reads, i, i)}
    for me, collision in found.items():
        assert collision.problem.message.startswith(f"topic 't{me}' is ")
        for other in (int(ref.name[1:]) for ref in collision.others):
            assert _reaches(reads, me, other) and _reaches(reads, other, me), (
                "every job its cycle names is in its loop"
            )


@pytest.mark.parametrize(
    ("documents", "told"),
    [
        (
            [
                pipeline("team-a"),
                pipeline("team-b"),
                source("a", "t", "team-a"),
                source("b", "t", "team-a"),
                source("hidden", "t", "team-b"),
            ],
            "topic 't' is also the output topic of KafkaSource 'b' (spec.topic); topic 't' "
            "belongs to another namespace on this Kafka cluster (an output topic there)",
        ),
        (
            [
                pipeline("team-a"),
                pipeline("team-b"),
                source("a", "x.y", "team-a"),
                source("b", "x_y", "team-a"),
                source("hidden", "x_y", "team-b"),
            ],
            "topic 'x.y' differs from 'x_y' (output topic of KafkaSource 'b') and a topic of "
            "another namespace on this Kafka cluster only in '.' and '_'",
        ),
        (
            [
                pipeline("team-a", transactionalIdPrefix="x"),
                pipeline("team-b", transactionalIdPrefix="x"),
                job("j", "a.out", ["in"], ns="team-a"),
                job("j", "b.out", ["in"], ns="team-b"),
            ],
            "its producers' transactional ids (x/sink/j/<n>) are also those of a job of "
            "another namespace on this Kafka cluster",
        ),
    ],
    ids=["two writers, one hidden", "'.' and '_', one hidden", "ids of a hidden job"],
)
def test_the_tenant_is_told_its_own_resources_by_name_and_of_others_only_what_they_are(
    documents: list[Document], told: str
) -> None:
    mine = [c for c in collisions(*documents) if c.resource.namespace == "team-a"]
    messages = [c.problem.message for c in mine]
    assert any(m.startswith(told) for m in messages), messages
    assert not any("hidden" in m or "team-b" in m for m in messages), messages
