"""A hanging transaction made on purpose on the real broker: a producer with a long
``transaction.timeout.ms`` begins a transaction, writes, and is frozen (SIGSTOP), as a
zombie is. Records committed above it by another producer stay unreadable
``read_committed``. ``onceflow transactions list --watch`` names the partition and how
long its last stable offset stood; ``abort`` refuses without ``--yes`` (saying what it
costs), then fences the id, and the committed records become readable while the frozen
transaction's never do. The operator, watching a Pipeline's topics, makes the Pipeline
Degraded naming the partition, and clears it once the transaction is aborted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from confluent_kafka import Producer

from onceflow.eos.consume import read_to_end
from onceflow.eos.partition_ends import transaction_max_timeout_s
from tests.integration.test_operator import pipeline, source
from tests.support.cli import onceflow
from tests.support.cluster import Cluster, running_operator
from tests.support.kafka import new_topic
from tests.support.metrics import free_port
from tests.support.waiting import wait_for

pytestmark = pytest.mark.kafka

ZOMBIE = """
import sys
from confluent_kafka import Producer
bootstrap, topic, tid = sys.argv[1:]
producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid,
                     "transaction.timeout.ms": 600000})
producer.init_transactions(30)
producer.begin_transaction()
for n in range(5):
    producer.produce(topic, b"never-committed", b"zombie")
assert producer.flush(30) == 0
print("open", flush=True)
sys.stdin.read()
"""


def _onceflow(*args: str) -> subprocess.CompletedProcess[str]:
    return onceflow("transactions", *args)


@contextmanager
def frozen_transaction(bootstrap: str, topic: str) -> Iterator[str]:
    """An open transaction of 5 records on ``topic`` whose producer is frozen, until
    the block ends; yields its transactional id."""
    tid = f"zombie-{uuid.uuid4().hex[:8]}"
    zombie = subprocess.Popen(
        [sys.executable, "-c", ZOMBIE, bootstrap, topic, tid],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert zombie.stdout is not None and zombie.stdout.readline().strip() == "open"
        os.kill(zombie.pid, signal.SIGSTOP)
        yield tid
    finally:
        zombie.kill()
        zombie.wait(30)


@pytest.fixture
def zombie_transaction(kafka_bootstrap: str) -> Iterator[tuple[str, str]]:
    """(topic, transactional id) of a frozen open transaction on a topic of its own."""
    topic = new_topic(kafka_bootstrap, "hanging")
    with frozen_transaction(kafka_bootstrap, topic) as tid:
        yield topic, tid


def _committed(bootstrap: str, topic: str) -> list[bytes]:
    return [m.value() or b"" for m in read_to_end(bootstrap, topic, timeout_s=30)]


def _held(bootstrap: str, topic: str) -> None:
    """A read_committed read stops at the open transaction (and says so)."""
    with pytest.raises(TimeoutError, match=r"partitions \[0\] are held by an open transaction"):
        list(read_to_end(bootstrap, topic, timeout_s=3))


def test_a_frozen_transaction_is_listed_as_hanging_and_aborting_it_frees_the_readers(
    kafka_bootstrap: str, zombie_transaction: tuple[str, str]
) -> None:
    topic, tid = zombie_transaction
    others = Producer({"bootstrap.servers": kafka_bootstrap, "enable.idempotence": True})
    for n in range(3):
        others.produce(topic, f"committed-{n}".encode(), b"other")
    assert others.flush(30) == 0
    _held(kafka_bootstrap, topic)

    listed = _onceflow("list", "--bootstrap", kafka_bootstrap, "--topic", topic, "--watch", "4")
    assert listed.returncode == 1, listed.stderr
    assert f"{topic}/0\tLSO 0\tHW 8\topen transaction" in listed.stdout, listed.stdout
    assert f"hanging: {topic}/0: the last stable offset has stood at 0 for " in listed.stdout
    assert "with 8 offset(s) above it" in listed.stdout, listed.stdout

    refused = _onceflow("abort", "--bootstrap", kafka_bootstrap, "--transactional-id", tid)
    assert refused.returncode == 2
    assert f"not aborted: aborting {tid}'s open transaction discards" in refused.stderr
    _held(kafka_bootstrap, topic)  # nothing changes without --yes

    aborted = _onceflow("abort", "--bootstrap", kafka_bootstrap, "--transactional-id", tid, "--yes")
    assert aborted.returncode == 0, aborted.stdout + aborted.stderr
    wait_for(
        lambda: (
            _committed(kafka_bootstrap, topic) == [b"committed-0", b"committed-1", b"committed-2"]
        ),
        30,
        "the committed records to become readable",
    )
    after = _onceflow("list", "--bootstrap", kafka_bootstrap, "--topic", topic)
    assert "nothing open" in after.stdout and after.returncode == 0, after.stdout


@pytest.mark.k8s
def test_the_operator_names_a_hanging_transaction_on_its_pipeline_until_it_is_aborted(
    kubeconfig: str, kafka_bootstrap: str, tmp_path: Path
) -> None:
    """A running source's topic gets a frozen transaction from a producer outside the
    Pipeline (the source's own transactions commit on above it). With a 5 s bound and a
    look a second, the Pipeline turns Degraded naming the partition; aborting it with
    the CLI clears it."""
    quick = (("ONCEFLOW_HANGING_AFTER_S", "5"), ("ONCEFLOW_HANGING_LOOK_S", "1"))
    port = free_port()
    extra = ("--standalone", f"--metrics-port={port}")
    with running_operator(kubeconfig, tmp_path, "hanging", quick, extra) as (cluster, _, _):
        topic = f"hang-{uuid.uuid4().hex[:6]}"
        cluster.create("pipelines", pipeline(kafka_bootstrap, "enabled"))
        cluster.create("kafkasources", source(1, topic, limit=100000))
        wait_for(
            lambda: cluster.condition("kafkasources", "counter", "Ready").get("status") == "True",
            120,
            "the source to run",
        )
        with frozen_transaction(kafka_bootstrap, topic) as tid:
            degraded = cluster.wait_for_reason(
                "pipelines", "orders", "Degraded", "HangingTransaction", 60, "the hang named"
            )
            assert f"{topic}/0: the last stable offset has stood at " in degraded["message"]
            assert "onceflow transactions abort" in degraded["message"], degraded
            assert any(e.reason == "HangingTransaction" for e in cluster.events("orders"))
            assert _hanging_partitions(port) == 1.0, "the metric counts the held partition"
            aborted = _onceflow(
                "abort", "--bootstrap", kafka_bootstrap, "--transactional-id", tid, "--yes"
            )
            assert aborted.returncode == 0, aborted.stdout + aborted.stderr
            wait_for(
                lambda: _reason(cluster, "Degraded") != "HangingTransaction",
                30,
                "the Pipeline to stop naming the hang once it is aborted",
            )
            assert _hanging_partitions(port) == 0.0


def _hanging_partitions(port: int) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as page:
        text = page.read().decode()
    (line,) = [
        x for x in text.splitlines() if x.startswith("onceflow_operator_hanging_partitions ")
    ]
    return float(line.split()[1])


def _reason(cluster: Cluster, type_: str) -> str:
    return str(cluster.condition("pipelines", "orders", type_).get("reason", ""))


def test_the_bound_of_topics_others_write_is_what_the_broker_grants_any_producer(
    kafka_bootstrap: str,
) -> None:
    """scripts/kafka.sh sets transaction.max.timeout.ms=900000."""
    assert transaction_max_timeout_s(kafka_bootstrap) == 900.0
