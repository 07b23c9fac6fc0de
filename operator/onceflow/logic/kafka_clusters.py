"""Which Pipelines reach one Kafka cluster, known only by their bootstrap servers.

Topics and transactional ids are unique per cluster, so every ownership rule is
judged per cluster. Two bootstrap lists that share a broker address reach one cluster
(a broker belongs to one cluster): ``kafka-0:9092,kafka-1:9092`` and ``kafka-1:9092``
are one. Two names of one broker (an IP address and a DNS name) are not recognised as
one, so a pipeline that spells its cluster differently escapes the rules; the other
way round (two clusters taken for one) cannot happen.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

KAFKA_DEFAULT_PORT = 9092
"""What clients connect to when an address names no port."""


def _addresses(servers: str) -> list[str]:
    """``PLAINTEXT://Kafka-0:9092, kafka-1`` -> ``['kafka-0:9092', 'kafka-1:9092']``."""
    found = []
    for given in servers.split(","):
        address = given.strip().lower().split("://")[-1]
        if address:
            found.append(
                address if re.search(r":[0-9]+$", address) else f"{address}:{KAFKA_DEFAULT_PORT}"
            )
    return found


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
