"""Which Pipelines (and connectors reading Kafka) reach one Kafka cluster, known only
by their bootstrap servers.

Topics and transactional ids are unique per cluster, so every ownership rule is
judged per cluster. An address is compared in one spelling: lower case, without a
``PLAINTEXT://``-style prefix or a fully qualified name's final dot, with Kafka's
default port when it names none, and a Kubernetes service's name without the cluster
domain (``kafka.kafka.svc``, ``kafka.kafka.svc.cluster.local`` and
``kafka.kafka.svc.cluster.local.`` are one address). Two bootstrap lists that share an
address reach one cluster (a broker belongs to one cluster): ``kafka-0:9092,kafka-1:9092``
and ``kafka-1:9092`` are one.

Addresses are compared, never resolved, so the judgement can be wrong both ways:
- one broker under two names is taken for two clusters, and a pipeline that spells its
  cluster differently escapes the rules: an IP address and a DNS name, a name completed
  by the pod's DNS search path (``kafka`` or ``kafka.kafka`` for
  ``kafka.kafka.svc``), another listener's port, a load balancer's name;
- one address that reaches two clusters is taken for one: ``localhost:9092`` or
  ``127.0.0.1:9092`` through different port-forwards or on different machines, a DNS
  name moved to another cluster, or a host outside Kubernetes whose name merely has
  ``svc`` as its third or fourth label. Workloads that cannot collide are then refused
  as if they did (nothing is lost; spell one of the addresses differently).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from onceflow.api.pipeline import Pipeline

KAFKA_DEFAULT_PORT = 9092
"""What clients connect to when an address names no port."""
HOST_AND_PORT = re.compile(r"(?P<host>.*):(?P<port>[0-9]+)")
SERVICE_HOST = re.compile(r"(?P<service>(?:[a-z0-9-]+\.){2,3}svc)(?:\.[a-z0-9.-]+)?")
"""A Kubernetes service (``<service>.<namespace>.svc``) or a pod behind a headless
service (``<pod>.<service>.<namespace>.svc``), with or without the cluster domain."""


def _address(given: str) -> str | None:
    """``PLAINTEXT://Kafka.Kafka.svc.cluster.local.`` -> ``kafka.kafka.svc:9092``;
    None for a blank entry."""
    address = given.strip().lower().split("://")[-1]
    if not address:
        return None
    found = HOST_AND_PORT.fullmatch(address)
    host, port = (found["host"], found["port"]) if found else (address, str(KAFKA_DEFAULT_PORT))
    host = host.removesuffix(".")
    service = SERVICE_HOST.fullmatch(host)
    return f"{service['service'] if service else host}:{port}"


def _addresses(servers: str) -> list[str]:
    """``PLAINTEXT://Kafka-0:9092, kafka-1`` -> ``['kafka-0:9092', 'kafka-1:9092']``."""
    return [address for given in servers.split(",") if (address := _address(given))]


def cluster_keys(bootstrap_lists: Iterable[str]) -> dict[str, str]:
    """Bootstrap servers -> one key per cluster: lists sharing an address are one."""
    lists = set(bootstrap_lists)
    parent: dict[str, str] = {}

    def root(address: str) -> str:
        while parent[address] != address:
            address = parent[address]
        return address

    for servers in lists:
        addresses = _addresses(servers) or [servers]
        for address in addresses:
            parent.setdefault(address, address)
        for address in addresses[1:]:
            parent[root(address)] = root(addresses[0])
    return {servers: root((_addresses(servers) or [servers])[0]) for servers in lists}


@dataclass(frozen=True)
class Clusters:
    """The cluster of every Pipeline and every bootstrap list of one judgement."""

    keys: Mapping[str, str]
    override: str | None = None
    """One bootstrap list for every Pipeline (``onceflow run --bootstrap``)."""

    @classmethod
    def of(
        cls,
        pipelines: Iterable[Pipeline],
        bootstrap_lists: Iterable[str] = (),
        override: str | None = None,
    ) -> Clusters:
        """``bootstrap_lists``: other clusters Onceflow touches (a connector reading
        Kafka); ``override`` moves the Pipelines only, as ``--bootstrap`` does."""
        own = [override or p.spec.kafka.bootstrap_servers for p in pipelines]
        return cls(cluster_keys([*own, *bootstrap_lists]), override)

    def of_pipeline(self, pipeline: Pipeline) -> str:
        return self.keys[self.override or pipeline.spec.kafka.bootstrap_servers]

    def of_servers(self, servers: str) -> str:
        return self.keys[servers]
