"""What the campaign's timeline is drawn from: each pipeline's output as a reader sees
it, sampled as it grows. A Kafka output is followed by a ``read_committed`` consumer
(records visible, and how long each took from its producer's timestamp to being
readable); a table by its row count."""

from __future__ import annotations

import statistics
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import psycopg
from confluent_kafka import Consumer

SAMPLE_S = 0.5


@dataclass
class Timeline:
    """One pipeline's samples: ``progress`` as ``(time, visible so far)`` and
    ``latency`` as ``(time, median seconds to visible of the records seen then)``."""

    pipeline: str
    progress: list[tuple[float, int]] = field(default_factory=list)
    latency: list[tuple[float, float]] = field(default_factory=list)


class Watch(threading.Thread):
    """A sampler thread; ``stop()`` ends it and returns its timeline."""

    def __init__(self, pipeline: str) -> None:
        super().__init__(daemon=True, name=f"watch-{pipeline}")
        self.timeline = Timeline(pipeline)
        self._stop_event = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.follow()
        except BaseException as error:  # reported by stop(): a dead watch draws nothing
            self.error = error

    def follow(self) -> None:
        raise NotImplementedError

    @property
    def stopping(self) -> bool:
        return self._stop_event.is_set()

    def stop(self) -> Timeline:
        self._stop_event.set()
        self.join(60)
        if self.error is not None:
            raise RuntimeError(f"the watch of {self.timeline.pipeline} died") from self.error
        return self.timeline


class TopicWatch(Watch):
    def __init__(self, pipeline: str, bootstrap: str, topic: str) -> None:
        super().__init__(pipeline)
        self.bootstrap, self.topic = bootstrap, topic

    def _consumer(self) -> Consumer:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"campaign-watch-{uuid.uuid4().hex[:8]}",
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "topic.metadata.refresh.interval.ms": 2000,
            }
        )
        consumer.subscribe([self.topic])
        return consumer

    def follow(self) -> None:
        consumer = self._consumer()
        seen = 0
        waits: list[float] = []
        next_sample = time.time() + SAMPLE_S
        try:
            while not self.stopping:
                for message in consumer.consume(1000, timeout=0.2):
                    if message.error() is None:  # errors: a broker away, retried by itself
                        seen += 1
                        waits.append(time.time() - self._produced_at(message))
                now = time.time()
                if now >= next_sample:
                    self.timeline.progress.append((now, seen))
                    if waits:
                        self.timeline.latency.append((now, statistics.median(waits)))
                    waits.clear()
                    next_sample = now + SAMPLE_S
        finally:
            consumer.close()

    @staticmethod
    def _produced_at(message: Any) -> float:
        _, millis = message.timestamp()
        return float(millis) / 1000


class TableWatch(Watch):
    def __init__(self, pipeline: str, dsn: str, table: str) -> None:
        super().__init__(pipeline)
        self.dsn, self.table = dsn, table

    def follow(self) -> None:
        conn: psycopg.Connection[Any] | None = None
        while not self.stopping:
            try:
                conn = conn or psycopg.connect(self.dsn, autocommit=True, connect_timeout=5)
                (rows,) = conn.execute(f"SELECT count(*) FROM {self.table}").fetchone() or (0,)
                self.timeline.progress.append((time.time(), int(rows)))
            except psycopg.Error:  # the server restarting under a fault: asked again
                if conn is not None:
                    conn.close()
                conn = None
            self._stop_event.wait(2 * SAMPLE_S)
        if conn is not None:
            conn.close()
