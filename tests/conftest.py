"""Session fixtures for the real test bed: Kafka, kube-apiserver, PostgreSQL, Spark.

Plain ``pytest`` after ``make install`` works: each fixture reuses a running service
or starts it (and stops what it started when the session ends).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support.kafka_cluster import KafkaCluster
from tests.support.node import Node
from tests.support.spark_archive import spark_submit_options
from tests.support.testbed import ScriptedService, jvm_writer_jars, spark_jars

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Every driver the suite starts (its own processes, `onceflow run`'s, the session
# fixture's) maps the class archive `make testbed-deps` made: half a driver's start.
if (_archive := spark_submit_options()) is not None:
    os.environ.setdefault("SPARK_SUBMIT_OPTS", _archive)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--alone",
        choices=("include", "exclude", "only"),
        default="include",
        help="tests marked alone: run them with the rest (default), leave them out (a run "
        "with workers side by side), or run only them (the run after it)",
    )


def pytest_configure(config: pytest.Config) -> None:
    """A test marked ``alone`` freezes the broker, restarts the database or replaces a
    cluster-wide object: beside another worker's test it breaks that test, not itself."""
    workers = getattr(config.option, "numprocesses", None)
    if workers not in (None, 0, 1) and config.getoption("--alone") != "exclude":
        raise pytest.UsageError(
            "tests marked alone cannot run beside other workers: add --alone=exclude to a "
            "run with -n, and run --alone=only after it (scripts/test.sh does both)"
        )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    choice = config.getoption("--alone")
    if choice == "include":
        return
    wanted = choice == "only"
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        (kept if (item.get_closest_marker("alone") is not None) == wanted else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def _service(script: str) -> Iterator[str]:
    service = ScriptedService(script)
    address = service.ensure_up()
    try:
        yield address
    finally:
        service.release()


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """``host:port`` of a real single-node KRaft broker."""
    yield from _service("kafka.sh")


@pytest.fixture(scope="session")
def kafka_cluster_bootstrap() -> Iterator[str]:
    """The bootstrap list of a real three-broker KRaft cluster (RF 3, min ISR 2)."""
    yield from _service("kafka-cluster.sh")


@pytest.fixture
def kafka_cluster(kafka_cluster_bootstrap: str) -> Iterator[KafkaCluster]:
    """The cluster for one test, whose killed or paused brokers run again after it."""
    cluster = KafkaCluster(kafka_cluster_bootstrap)
    try:
        yield cluster
    finally:
        cluster.restore()


@pytest.fixture(scope="session")
def kubeconfig() -> Iterator[str]:
    """Path of a kubeconfig for a real kube-apiserver (admin token)."""
    yield from _service("k8s.sh")


@pytest.fixture(scope="session")
def real_node(kafka_bootstrap: str) -> Iterator[Node]:
    """A cluster whose pods really run in containers (scripts/node.sh). The broker is
    started first: it listens on the node network only if it starts after the bridge
    can be made."""
    if os.geteuid() != 0:
        pytest.skip("the real node needs root (containerd, kubelet, iptables)")
    for kubeconfig in _service("node.sh"):
        yield Node(kubeconfig)


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """libpq DSN of a real PostgreSQL server (trust auth, user ``onceflow``)."""
    yield from _service("postgres.sh")


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """``http://host:port`` of an S3 API (S3Proxy, in memory)."""
    yield from _service("s3proxy.sh")


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The drivers' own local SparkSession (Kafka connector jars, the JVM sink writer's,
    this interpreter for Python workers), so tests run Spark exactly as `onceflow
    spark-job` does."""
    from onceflow.spark.session import local_session

    os.environ.setdefault("ONCEFLOW_SPARK_JARS", str(Path(spark_jars()[0]).parent))
    os.environ.setdefault("ONCEFLOW_WRITER_JARS", str(Path(jvm_writer_jars()[0]).parent))
    session = local_session("onceflow-tests")
    try:
        yield session
    finally:
        session.stop()
