"""What the campaign's timeline is drawn from: each pipeline's output as a reader sees
it, sampled as it grows. A Kafka output is followed by a ``read_committed`` consumer
(records visible, the latest produce time among them, and how long each took from
its producer's timestamp to being readable); a table by its row count, a file sink's
output by the rows of the files its log lists."""

from __future__ import annotations

import statistics
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

from tests.campaign.file_sink_output import committed_files
from tests.campaign.recovery import Timeline

SAMPLE_S = 0.5


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
        except BaseException as error:  # reported by the campaign: a dead watch draws nothing
            self.error = error

    def follow(self) -> None:
        raise NotImplementedError

    @property
    def stopping(self) -> bool:
        return self._stop_event.is_set()

    def stop(self) -> Timeline:
        """Its timeline so far, whether or not it ever started or died (``error``)."""
        self._stop_event.set()
        if self.ident is not None:
            self.join(60)
        return self.timeline

    def seen(self) -> int:
        progress = self.timeline.progress
        return progress[-1][1] if progress else 0


class TopicWatch(Watch):
    def __init__(self, pipeline: str, bootstrap: str, topic: str) -> None:
        super().__init__(pipeline)
        self.bootstrap, self.topic = bootstrap, topic

    def _consumer(self) -> Consumer | None:
        """A consumer assigned every partition from the start (no group: nothing can
        rebalance it back to the beginning), once the topic exists (a sink creates its
        own with its first batch); None if stopped first."""
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "campaign-watch-unused",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
            }
        )
        while not self.stopping:
            try:
                found = consumer.list_topics(self.topic, timeout=10).topics.get(self.topic)
            except KafkaException:  # no broker answered in time: asked again
                found = None
            if found is not None and found.error is None and found.partitions:
                consumer.assign(
                    [TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in found.partitions]
                )
                return consumer
            self._stop_event.wait(1)
        consumer.close()
        return None

    def follow(self) -> None:
        consumer = self._consumer()
        if consumer is None:
            return
        seen, newest = 0, 0.0
        waits: list[float] = []
        next_sample = time.time() + SAMPLE_S
        try:
            while not self.stopping:
                for message in consumer.consume(1000, timeout=0.2):
                    if message.error() is None:  # errors: a broker away, retried by itself
                        seen += 1
                        produced = self._produced_at(message)
                        newest = max(newest, produced)
                        waits.append(time.time() - produced)
                now = time.time()
                if now >= next_sample:
                    self.timeline.progress.append((now, seen))
                    self.timeline.newest.append((now, newest))
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


class FileSinkWatch(Watch):
    """Rows in the files Spark's file sink has committed (its log lists them): a file
    once listed never changes, so each is counted once."""

    def __init__(self, pipeline: str, output: Path) -> None:
        super().__init__(pipeline)
        self.output = output

    def follow(self) -> None:
        counted: dict[Path, int] = {}
        while not self.stopping:
            for path in committed_files(self.output):
                if path not in counted:
                    with path.open("rb") as file:
                        counted[path] = sum(1 for line in file if line.strip())
            self.timeline.progress.append((time.time(), sum(counted.values())))
            self._stop_event.wait(2 * SAMPLE_S)
