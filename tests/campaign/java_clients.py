"""Kafka's own Java clients, for what the campaign must not take from librdkafka
alone: a second reader of every audited topic, and the coordinators' view of a
transaction (DescribeTransactions, which librdkafka lacks). The two Java files are
compiled once per content into the cache, then run against the test bed's Kafka jars."""

from __future__ import annotations

import hashlib
import subprocess
from base64 import b64decode
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from tests.support.testbed import ROOT, script_value

SOURCES = sorted(Path(__file__).parent.glob("*.java"))
CACHE = Path.home() / ".cache" / "onceflow" / "campaign-java"

Read = list[tuple[int, int, bytes | None, bytes | None]]
"""``(partition, offset, key, value)`` of every record read, in partition and offset
order."""


@cache
def _classpath() -> str:
    libs = script_value("scripts/kafka.sh", "libs")
    digest = hashlib.sha256(b"".join(s.read_bytes() for s in SOURCES)).hexdigest()[:16]
    classes = CACHE / digest
    if not classes.exists():
        building = classes.with_suffix(".building")
        subprocess.run(
            ["javac", "-cp", f"{libs}/*", "-d", str(building), *map(str, SOURCES)],
            check=True, capture_output=True, timeout=300,
        )  # fmt: skip
        building.replace(classes)
    return f"{classes}:{libs}/*"


def _java(*args: str, timeout_s: float) -> str:
    done = subprocess.run(
        ["java", "-cp", _classpath(), *args],
        cwd=ROOT, check=True, capture_output=True, text=True, timeout=timeout_s,
    )  # fmt: skip
    return done.stdout


def read_with_java(bootstrap: str, topic: str, out: Path) -> Read:
    """Every record of ``topic`` read committed by Kafka's Java consumer (written to
    ``out`` on the way)."""
    _java("ReadCommitted", bootstrap, topic, str(out), timeout_s=900)
    read = []
    for line in out.read_bytes().splitlines():
        partition, offset, key, value = line.split(b"\t")
        read.append((int(partition), int(offset), _bytes(key), _bytes(value)))
    return sorted(read)


def _bytes(base64: bytes) -> bytes | None:
    return None if base64 == b"-" else b64decode(base64)


@dataclass(frozen=True)
class TransactionState:
    state: str
    """The coordinator's word: Ongoing, PrepareCommit, CompleteAbort, Empty..."""
    started_s: float | None
    """When its current transaction began (seconds since the epoch); None for none."""

    def open_since(self, moment: float) -> bool:
        """Ongoing, and begun at or after ``moment`` (e.g. its process's start)."""
        return self.state == "Ongoing" and (self.started_s or 0) >= moment


class Coordinators:
    """The coordinators' view of transactional ids, from one Java process kept for the
    whole campaign (a JVM started per question costs seconds on a busy machine)."""

    def __init__(self, bootstrap: str) -> None:
        self.process = subprocess.Popen(
            ["java", "-cp", _classpath(), "DescribeTransactions", bootstrap],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, cwd=ROOT,
        )  # fmt: skip

    def states(self, ids: list[str]) -> dict[str, TransactionState]:
        """LookupError when the coordinators could not answer (one being elected)."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(" ".join(ids) + "\n")
        self.process.stdin.flush()
        states, failure = {}, None
        for line in iter(self.process.stdout.readline, ".\n"):
            if not line:
                raise LookupError("the DescribeTransactions process ended")
            name, state, *started = line.rstrip("\n").split("\t")
            if name == "!":
                failure = state
                continue
            millis = int(started[0])
            states[name] = TransactionState(state, millis / 1000 if millis >= 0 else None)
        if failure is not None:
            raise LookupError(failure)
        return states

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(30)
