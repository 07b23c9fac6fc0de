"""Session fixtures for the real test bed: Kafka, kube-apiserver, PostgreSQL, Spark.

Plain ``pytest`` after ``make install`` works: each fixture reuses a running service
or starts it (and stops what it started when the session ends).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from tests.support.testbed import ScriptedService, spark_jars

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


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
def kubeconfig() -> Iterator[str]:
    """Path of a kubeconfig for a real kube-apiserver (admin token)."""
    yield from _service("k8s.sh")


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """libpq DSN of a real PostgreSQL server (trust auth, user ``onceflow``)."""
    yield from _service("postgres.sh")


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """A local SparkSession with Spark's Kafka connector on the classpath."""
    from pyspark.sql import SparkSession

    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("onceflow-tests")
        .config("spark.jars", ",".join(spark_jars()))
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    try:
        yield session
    finally:
        session.stop()
