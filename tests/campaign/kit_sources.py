"""The rig's other connector kinds: the source conformance kit's built-in subjects
(``files``, ``kafka``, ``postgres`` incrementing), each a KafkaSource of one of the
rig's runs. The kit's config, load and audit are reused whole: a connector that passes
the kit is struck here by what the kit never does to it (brokers killed and paused,
its coordinator lost, its network cut, its supervisor killed mid-rollout).

``files`` and ``kafka`` need only the brokers, so they run in the source's network
namespace beside ``counter`` and are cut off with it; the incrementing query reaches
PostgreSQL on the host's loopback, so it runs on the host."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conformance.source_kit import MIN_FAULTS, KitAudit, KitSize, SourceSubject
from tests.conformance.source_subjects import (
    FilesSubject,
    KafkaMirrorSubject,
    PostgresIncrementingSubject,
)
from tests.support.background import BackgroundWork

SECONDS_PER_FAULT = 4.5
"""What the fault phase took per fault once eight pipelines ran (a 1,000-fault run on
2 cores): the kit loads are paced to last that long, and hold before their last part
until the faults are over (a slower phase finds them held, never finished)."""


@dataclass(frozen=True)
class CampaignLoadSize(KitSize):
    """The kit's size, its loads lasting as long as the campaign's fault phase."""

    seconds: float = 0.0

    @property
    def load_s(self) -> float:
        return self.seconds


@dataclass
class KitSource:
    subject: SourceSubject
    run: str
    """``source`` (the network namespace's run) or ``host``."""
    topic: str
    config: dict[str, Any] = field(default_factory=dict)
    load: BackgroundWork | None = None

    @property
    def workload(self) -> str:
        """Its KafkaSource's name."""
        return self.subject.name

    def prepare(self, workdir: Path, size: KitSize, bootstrap: str, inside: str) -> None:
        """Creates its source system and its load (held until ``release``). ``inside``:
        the brokers' address from the run's network, which a mirror's config needs."""
        self.config = self.subject.config(workdir, size)
        if "bootstrapServers" in self.config:
            self.config["bootstrapServers"] = inside
        self.load = self.subject.load(size, bootstrap, self.topic)
        self.load.released.clear()

    def release(self, within_s: float = 300) -> None:
        """Lets the load make its last changes, and waits for it to end."""
        if self.load is None:
            return
        self.load.released.set()
        self.load.join(within_s)
        if self.load.error is not None:
            raise RuntimeError(f"the load of {self.workload} failed") from self.load.error

    def audit(self, bootstrap: str) -> KitAudit:
        return self.subject.audit(bootstrap, self.topic)


def kit_sources(rig_name: str, bootstrap: str, dsn: str) -> list[KitSource]:
    subjects: list[tuple[SourceSubject, str]] = [
        (FilesSubject(), "source"),
        (KafkaMirrorSubject(bootstrap), "source"),
        (PostgresIncrementingSubject(dsn), "host"),
    ]
    return [KitSource(s, run, f"{rig_name}.{s.name}") for s, run in subjects]


def load_size(faults: int, records: int) -> CampaignLoadSize:
    return CampaignLoadSize(
        faults=max(MIN_FAULTS, faults),
        records=records,
        seconds=max(120.0, SECONDS_PER_FAULT * faults),
    )
