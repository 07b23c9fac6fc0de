"""A network namespace of a test's own, for the network faults a machine's processes
never show each other: partitioned from the brokers (iptables drops), or a slow and
lossy link (tc tbf, iptables random drops). The namespace reaches the three-broker cluster's
address for namespaces (scripts/kafka-cluster.sh ``netns-bootstrap``) through a veth
pair whose host end is its gateway; nothing leaves the machine. Needs root."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

BROKERS_IP = "198.18.0.1"
"""The cluster's address for namespaces (kafka-cluster.sh's NETNS_IP)."""


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


@dataclass(frozen=True)
class Namespace:
    name: str
    device: str
    """The namespace's end of the veth: where tbf shapes what the namespace sends."""

    def command(self, *argv: str) -> list[str]:
        """``argv`` run inside the namespace."""
        return ["ip", "netns", "exec", self.name, *argv]

    def _run(self, *argv: str) -> str:
        done = subprocess.run(
            self.command(*argv), check=True, capture_output=True, text=True, timeout=30
        )
        return done.stdout

    def partition(self) -> None:
        """Nothing from the namespace reaches the brokers, nothing from them comes back."""
        self._run("iptables", "-A", "OUTPUT", "-d", BROKERS_IP, "-j", "DROP")
        self._run("iptables", "-A", "INPUT", "-s", BROKERS_IP, "-j", "DROP")

    def heal(self) -> None:
        self._run("iptables", "-F")

    def dropped(self) -> int:
        """Packets the namespace's DROP rules dropped so far: proof that a partition or
        a lossy link struck live traffic."""
        total = 0
        for chain in ("OUTPUT", "INPUT"):
            listing = self._run("iptables", "-L", chain, "-v", "-n", "-x")
            total += sum(
                int(line.split()[0])
                for line in listing.splitlines()
                if "DROP" in line and line.split()[0].isdigit()
            )
        return total

    def degrade(self, rate_kbit: int, loss_pct: float) -> None:
        """A slow and lossy link: what the namespace sends is shaped to ``rate_kbit``
        (tbf: a queue, so latency grows with load), and ``loss_pct`` of the packets each
        way are dropped at random. (tc netem, which would delay and reorder too, is not
        in every kernel: this sandbox's has none.)"""
        self._run(
            "tc", "qdisc", "replace", "dev", self.device, "root", "tbf",
            "rate", f"{rate_kbit}kbit", "burst", "16kbit", "latency", "400ms",
        )  # fmt: skip
        chance = f"{loss_pct / 100:.4f}"
        for chain, way in (("OUTPUT", "-d"), ("INPUT", "-s")):
            self._run(
                "iptables", "-A", chain, way, BROKERS_IP, "-m", "statistic",
                "--mode", "random", "--probability", chance, "-j", "DROP",
            )  # fmt: skip

    def restore_link(self) -> None:
        self._run("tc", "qdisc", "del", "dev", self.device, "root")
        self.heal()


@contextmanager
def network_namespace(index: int) -> Iterator[Namespace]:
    """Namespace ``ofnet<index>`` on 198.18.<index+1>.0/30 (the benchmarking range, as
    the brokers' address), gone afterwards; one a killed run left is removed first."""
    name, host, inner = f"ofnet{index}", f"ofh{index}", f"ofn{index}"
    subnet = f"198.18.{index + 1}"
    _remove(name, host)
    try:
        _ip("netns", "add", name)
        _ip("link", "add", host, "type", "veth", "peer", "name", inner)
        _ip("link", "set", inner, "netns", name)
        _ip("addr", "add", f"{subnet}.1/30", "dev", host)
        _ip("link", "set", host, "up")
        _ip("-n", name, "addr", "add", f"{subnet}.2/30", "dev", inner)
        _ip("-n", name, "link", "set", inner, "up")
        _ip("-n", name, "link", "set", "lo", "up")
        _ip("-n", name, "route", "add", "default", "via", f"{subnet}.1")
        yield Namespace(name, inner)
    finally:
        _remove(name, host)


def _remove(name: str, host: str) -> None:
    subprocess.run(["ip", "netns", "delete", name], check=False, capture_output=True)
    subprocess.run(["ip", "link", "delete", host], check=False, capture_output=True)
