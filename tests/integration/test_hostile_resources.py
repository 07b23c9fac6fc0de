"""Malformed and hostile resources, generated, against the real API server with the
webhook and the operator running. Each document is judged by Onceflow's own rules
(the models, the connector checks, the tenant policy); the API server, its schema and
CEL rules and the webhook together must agree: every invalid one refused naming a
field it got wrong, every valid one stored. Stored ones are reconciled, and the
operator must neither crash nor stop serving a canary job in the same namespace.

``ONCEFLOW_FUZZ_CASES`` sets how many documents are tried (default 300)."""

from __future__ import annotations

import copy
import json
import os
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes.client.exceptions import ApiException

from onceflow.control.admission import review
from onceflow.control.kube import ALL_NAMESPACES
from onceflow.logic.tenant_policy import TenantPolicy
from tests.integration.test_operator_spark import _job
from tests.support.cluster import Cluster, OperatorProcess
from tests.support.waiting import wait_for
from tests.support.webhook import webhook_operator

# alone: its webhook's configuration is cluster-wide (one name, every namespace's writes).
pytestmark = [pytest.mark.alone, pytest.mark.k8s, pytest.mark.kafka]

CASES = int(os.environ.get("ONCEFLOW_FUZZ_CASES", "300"))
POLICY = TenantPolicy(image_prefixes=("registry.example.com/",))
# Workloads name a Pipeline that never exists unless a case points them at "orders"
# (disabled, on a closed port): then they are reconciled for real, with pods (none
# runs here) and Jobs, and without reaching a broker.
GHOST = "ghost"
BASES: dict[str, dict[str, Any]] = {
    "pipelines": {
        "kind": "Pipeline",
        "spec": {"kafka": {"bootstrapServers": "127.0.0.1:9"}, "exactlyOnce": "disabled"},
    },
    "kafkasources": {
        "kind": "KafkaSource",
        "spec": {
            "pipeline": GHOST,
            "topic": "t",
            "tasksMax": 2,
            "connector": {"type": "sequence", "config": {"streams": 4}},
        },
    },
    "sparkjobs": {
        "kind": "SparkJob",
        "spec": {
            "pipeline": GHOST,
            "input": {"topics": ["t"]},
            "transform": {"sql": "SELECT key, value FROM input"},
            "sink": {"kafka": {"topic": "out", "partitions": 2}},
            "checkpoint": {"path": "/tmp/fuzz"},
        },
    },
}
PATHS = {
    "pipelines": [
        "spec.kafka",
        "spec.kafka.bootstrapServers",
        "spec.kafka.authSecretRef",
        "spec.exactlyOnce",
        "spec.transactionalIdPrefix",
        "metadata.name",
    ],
    "kafkasources": [
        "spec.pipeline",
        "spec.topic",
        "spec.tasksMax",
        "spec.connector",
        "spec.connector.type",
        "spec.connector.config",
        "spec.connector.config.streams",
        "spec.connector.config.batchSize",
        "spec.transactionBoundary",
        "spec.transactionBoundaryIntervalMs",
        "spec.transactionTimeoutMs",
        "spec.exactlyOnceSupport",
        "spec.image",
        "spec.resources",
        "spec.volumes",
        "spec.offsetsTopic",
        "metadata.name",
    ],
    "sparkjobs": [
        "spec.pipeline",
        "spec.input",
        "spec.input.topics",
        "spec.input.maxOffsetsPerTrigger",
        "spec.transform",
        "spec.transform.sql",
        "spec.sink",
        "spec.sink.kafka.partitions",
        "spec.sink.kafka.delivery",
        "spec.sparkConf",
        "spec.image",
        "spec.executor.instances",
        "spec.trigger",
        "spec.outputMode",
        "spec.watermark",
        "spec.dedup",
        "spec.env",
        "spec.submitter",
        "metadata.name",
    ],
}
HOSTILE: list[Any] = [
    "pyspark.shell:Anything",
    "os:system",
    "onceflow.connectors.sequence:SequenceConnector",
    "docker.io/someone/miner:latest",
    "registry.example.com/team/job:1",
    "../../etc/passwd",
    "x" * 300,
    "a" * 57,
    "Not_A_Name",
    {"spark.kubernetes.authenticate.driver.serviceAccountName": "admin"},
    {"spark.jars.packages": "org.evil:agent:1"},
    {"spark.sql.shuffle.partitions": "8"},
    {"plugin.library.paths": "/tmp/x.so"},
    {"name": "kafka-auth"},
    {"f" + str(i): i for i in range(150)},
    [{"name": "LD_PRELOAD", "value": "/tmp/x.so"}],
    [{"name": "data", "mountPath": "/", "persistentVolumeClaim": {"claimName": "c"}}],
    -1,
    0,
    2**31,
    10**12,
    1.5,
    True,
    None,
    [],
    {},
]
RUN = uuid.uuid4().hex[:6]
OWN_NAMESPACE = "@namespace"
"""Stands for the test's namespace in a value (a prefix must start with it)."""
# Values each field takes in a valid object, so that valid documents are tried as
# often as broken ones ("no valid one is refused" is half of the claim).
VALID: dict[str, list[Any]] = {
    "spec.kafka.bootstrapServers": ["127.0.0.1:9", "127.0.0.1:9,127.0.0.1:10"],
    "spec.exactlyOnce": ["disabled", "preparing", "enabled"],
    # The namespace's own (OWN_NAMESPACE becomes its name), unused elsewhere.
    "spec.transactionalIdPrefix": [None, f"{OWN_NAMESPACE}.team-{uuid.uuid4().hex[:6]}"],
    # This run's own: a test bed's API server keeps what an interrupted run left in its
    # namespaces, which would own these topics on the same (fictional) cluster.
    "spec.topic": [f"orders-{RUN}.v2", RUN + "a" * 194],
    "spec.tasksMax": [1, 3],
    "spec.pipeline": ["orders"],
    "spec.connector.config.streams": [1, 64, 10000],
    "spec.connector.config.batchSize": [1, 500],
    "spec.transactionBoundary": ["poll", "interval"],
    "spec.transactionTimeoutMs": [60000, 900000],
    "spec.exactlyOnceSupport": ["requested", "required"],
    "spec.image": [None, "registry.example.com/team/job:1"],
    "spec.resources": [{"requests": {"cpu": "250m", "memory": "256Mi"}}],
    "spec.offsetsTopic": [None, "offsets.custom"],
    "spec.input.topics": [["a", "b"], [f"t{i}" for i in range(100)]],
    "spec.input.maxOffsetsPerTrigger": [None, 1, 10**9],
    "spec.transform.sql": ["SELECT key, value FROM input WHERE value IS NOT NULL"],
    "spec.sink.kafka.partitions": [1, 10000],
    "spec.sink.kafka.delivery": ["exactlyOnce"],
    "spec.sparkConf": [
        {"spark.sql.shuffle.partitions": "8", "spark.kubernetes.executor.request.cores": "1"}
    ],
    "spec.executor.instances": [1, 1000],
    "spec.trigger": [{"processingTime": "10s"}, {"availableNow": True}],
    "spec.outputMode": ["append"],
    "spec.env": [[{"name": "TZ", "value": "UTC"}]],
    "spec.submitter": ["spark-submit", "spark-operator"],
}
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=80)
values = st.one_of(
    st.sampled_from(HOSTILE),
    st.integers(-(2**40), 2**40),
    text,
    st.lists(text, max_size=4),
    st.dictionaries(text, text, max_size=4),
)


def _set(document: dict[str, Any], path: str, value: Any) -> None:
    *parents, leaf = path.split(".")
    node = document
    for key in parents:
        if not isinstance(node.get(key), dict):
            node[key] = {}
        node = node[key]
    if value is None:
        node.pop(leaf, None)
    else:
        node[leaf] = value


def _document(plural: str) -> dict[str, Any]:
    """The valid base of ``plural`` under a fresh name, writing topics and a checkpoint
    of its own: two stored workloads of one Pipeline writing one topic, or two jobs on
    one checkpoint, are refused (the pipeline graph), which is right, but not what a
    case that changed other fields is about."""
    document = copy.deepcopy(BASES[plural])
    document["apiVersion"] = "onceflow.io/v1alpha1"
    suffix = uuid.uuid4().hex[:8]
    document["metadata"] = {"name": f"fz-{suffix}"}
    if plural == "kafkasources":
        document["spec"]["topic"] = f"t-{suffix}"
    if plural == "sparkjobs":
        document["spec"]["sink"]["kafka"]["topic"] = f"out-{suffix}"
        document["spec"]["checkpoint"] = {"path": f"/tmp/fuzz-{suffix}"}
    return document


@st.composite
def documents(draw: st.DrawFn) -> tuple[str, dict[str, Any], list[str]]:
    """(plural, document, the paths it changed) from a valid base."""
    plural = draw(st.sampled_from(sorted(BASES)))
    document = _document(plural)
    paths = draw(st.lists(st.sampled_from(PATHS[plural]), min_size=1, max_size=3, unique=True))
    for path in paths:
        valid = VALID.get(path)
        use_valid = valid is not None and draw(st.integers(0, 3)) > 0
        value = draw(st.sampled_from(valid)) if valid and use_valid else draw(values)
        _set(document, path, copy.deepcopy(value))  # the pools' values are shared
    if draw(st.integers(0, 2)) == 0:
        unknown = f"spec.{draw(st.sampled_from(['colour', 'tasks', 'Image']))}"
        _set(document, unknown, 1)
        paths.append(unknown)
    return plural, document, paths


@pytest.fixture(scope="module")
def hostile_namespace(
    kubeconfig: str, kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Cluster, OperatorProcess]]:
    workdir = tmp_path_factory.mktemp("hostile")
    allowed = (("ONCEFLOW_IMAGE_PREFIXES", "registry.example.com/"),)
    with webhook_operator(kubeconfig, workdir, "fuzz", allowed) as running:
        yield running


def _judged(cluster: Cluster, document: dict[str, Any]) -> list[str]:
    """Onceflow's own verdict on the document, as the namespace stands: the problems."""
    namespace = cluster.namespace

    def lookup(plural: str, where: str, name: str) -> Any:
        try:
            return cluster.custom.get_namespaced_custom_object(
                "onceflow.io", "v1alpha1", where, plural, name
            )
        except ApiException:
            return None

    def listing(plural: str, where: str) -> list[Any]:
        if where == ALL_NAMESPACES:
            found = cluster.custom.list_cluster_custom_object("onceflow.io", "v1alpha1", plural)
        else:
            found = cluster.custom.list_namespaced_custom_object(
                "onceflow.io", "v1alpha1", where, plural
            )
        return list(found["items"])

    placed = {**document, "metadata": {**document["metadata"], "namespace": namespace}}
    return review(placed, lookup, listing, POLICY).problems


def _names_a_changed_field(message: str, paths: list[str]) -> bool:
    """The refusal names one of the fields the case changed (or one inside it), or the
    field holding it when a rule judges them together ("spec.input: set exactly one of
    topics or sources"). A name the API server cannot decode is ObjectMeta.name."""
    names = [p.replace("metadata.", "ObjectMeta.") for p in paths if p.startswith("metadata.")]
    parents = [p.rsplit(".", 1)[0] + ":" for p in paths if p.count(".") >= 2]
    return any(name in message for name in [*paths, *names, *parents])


def test_hostile_resources_are_refused_by_name_and_never_stop_the_operator(
    hostile_namespace: tuple[Cluster, OperatorProcess],
) -> None:
    cluster, operator = hostile_namespace
    canary = _job(partitions=2)
    canary["metadata"]["name"] = "canary"
    canary["spec"] |= {"submitter": "spark-submit", "checkpoint": {"path": "/tmp/canary"}}
    cluster.create("pipelines", {**BASES["pipelines"], "metadata": {"name": "orders"}})
    cluster.create("sparkjobs", canary)
    wait_for(
        lambda: cluster.condition("sparkjobs", "canary", "Progressing").get("reason") == "Starting",
        60,
        "the canary's driver submitted",
    )
    tally: Counter[str] = Counter()
    disagreements: list[str] = []

    def attempt(plural: str, document: dict[str, Any], paths: list[str]) -> None:
        prefix = document["spec"].get("transactionalIdPrefix")
        if isinstance(prefix, str):
            own = prefix.replace(OWN_NAMESPACE, cluster.namespace)
            document["spec"]["transactionalIdPrefix"] = own
        problems = _judged(cluster, document)
        try:
            # As kubectl applies: unknown fields are refused, not silently dropped.
            cluster.custom.create_namespaced_custom_object(
                "onceflow.io",
                "v1alpha1",
                cluster.namespace,
                plural,
                document,
                field_validation="Strict",
            )
        except ApiException as refused:
            message = json.loads(refused.body or "{}").get("message", str(refused))
            tally["refused"] += 1
            if not problems:
                disagreements.append(f"valid but refused: {paths} {message[:300]}")
            elif not _names_a_changed_field(message, paths):
                disagreements.append(f"refused without naming {paths}: {message[:300]}")
            return
        tally["stored"] += 1
        if problems:
            disagreements.append(f"invalid but stored ({paths}): {problems}")

    # Every valid value alone, then generated mixes of valid, broken and hostile ones.
    for plural, paths in PATHS.items():
        for path in paths:
            for value in VALID.get(path, []):
                document = _document(plural)
                _set(document, path, copy.deepcopy(value))
                attempt(plural, document, [path])
    swept = tally["stored"]
    assert tally["refused"] == 0, f"valid values refused: {disagreements}"

    @settings(
        max_examples=CASES,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(case=documents())
    def one(case: tuple[str, dict[str, Any], list[str]]) -> None:
        attempt(*case)

    one()
    print(f"hostile resources: {swept} valid values, then {CASES} generated; {dict(tally)}")
    assert not disagreements, "\n".join(disagreements[:10])
    assert tally["refused"] and tally["stored"], f"one-sided cases: {dict(tally)}"

    # The operator still serves the namespace: an edit of the canary is acted on.
    cluster.patch_spec("sparkjobs", "canary", {"transform": {"sql": "SELECT value FROM input"}})
    wait_for(
        lambda: cluster.condition("sparkjobs", "canary", "Ready").get("reason") == "Restarting",
        60,
        "the operator to act on the canary's edit after the fuzz",
    )
    assert operator.process is not None and operator.process.poll() is None, "still running"
    log = Path(operator.log).read_text()
    assert "reconcile pass failed" not in log, log[-3000:]
    assert "ReconcileError" not in log, log[-3000:]
