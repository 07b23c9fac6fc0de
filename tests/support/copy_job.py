"""The job the Spark sink tests run and the input it reads: numbered records of a few
streams, written in committed transactions each followed by an aborted transaction of
a poison record, which no job reading ``read_committed`` may ever pass on.

Size: ONCEFLOW_CHAOS_DRIVER_KILLS (default 3) driver kills per faulted job, each about
20 s of a driver's life; the input grows with it so that every kill finds batches of
its own and the faults that follow the kills still find input to work on.
"""

from __future__ import annotations

import json
import os
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from onceflow.api.driver import SparkJobSettings

DRIVER_KILLS = int(os.environ.get("ONCEFLOW_CHAOS_DRIVER_KILLS", "3"))
STREAMS = 4
RECORDS = 500 * max(DRIVER_KILLS, 3)
"""Per stream: 20 batches of BATCH_OFFSETS at the default, of which a kill takes at
most four (one to three of its own and the one it lands in)."""
BATCH_OFFSETS = 300
PER_TRANSACTION = 100
"""Numbers per stream in each committed transaction; an aborted one follows each."""
POISON = "poison"
"""The stream of the aborted records."""

Record = tuple[str, int]
"""``(stream, seq)``: one committed input record."""


@dataclass(frozen=True)
class CommittedInput:
    """The committed records one ``produce_input`` wrote, and where each landed: what
    a job's batches hold is told by the offsets its checkpoint planned."""

    topic: str
    placed: Mapping[Record, tuple[int, int]]
    """Record: (partition, offset)."""

    def records(self) -> Counter[Record]:
        return Counter(self.placed.keys())

    def through(self, ends: Mapping[str, Mapping[int, int]]) -> Counter[Record]:
        """The records below ``ends`` (``checkpoint.planned_ends`` of a batch): those of
        that batch and every earlier one."""
        topic_ends = ends.get(self.topic, {})
        return Counter(
            record
            for record, (partition, offset) in self.placed.items()
            if offset < topic_ends.get(partition, 0)
        )


def produce_input(
    bootstrap: str, topic: str, first_seq: int = 1, records: int = RECORDS
) -> CommittedInput:
    """Sequences ``first_seq`` .. ``first_seq + records - 1`` of every stream, keyed by
    stream, PER_TRANSACTION numbers a transaction, each committed transaction followed
    by an aborted one holding a poison record."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": uuid.uuid4().hex})
    producer.init_transactions(30)
    placed: dict[Record, tuple[int, int]] = {}
    failed: list[str] = []

    def landed(record: Record) -> Callable[[Any, Any], None]:
        def delivered(error: Any, message: Any) -> None:
            if error is not None:
                failed.append(str(error))
            else:
                placed[record] = (message.partition(), message.offset())

        return delivered

    end = first_seq + records
    for start in range(first_seq, end, PER_TRANSACTION):
        producer.begin_transaction()
        for seq in range(start, min(start + PER_TRANSACTION, end)):
            for s in range(STREAMS):
                stream = f"s{s}"
                body = json.dumps({"stream": stream, "seq": seq}).encode()
                producer.produce(topic, body, stream.encode(), on_delivery=landed((stream, seq)))
        # Flushing serves the delivery reports, which say where each record landed.
        assert producer.flush(30) == 0, "the input was not all written in 30 s"
        producer.commit_transaction(30)
        producer.begin_transaction()
        poison = json.dumps({"stream": POISON, "seq": start}).encode()
        producer.produce(topic, poison, POISON.encode())
        producer.flush(30)
        producer.abort_transaction(30)
    assert not failed, f"{len(failed)} input records failed: {failed[:3]}"
    assert len(placed) == STREAMS * records, f"{len(placed)} input records delivered"
    return CommittedInput(topic, placed)


def copy_job_settings(
    bootstrap: str, source: str, workdir: Path, sink: dict[str, Any], **fields: Any
) -> SparkJobSettings:
    """A job copying ``source`` into ``sink`` (wire form), checkpointed in ``workdir``,
    in batches of BATCH_OFFSETS every 500 ms; ``fields`` (wire names) override."""
    return SparkJobSettings.model_validate(
        {
            "job": f"copy-{uuid.uuid4().hex[:6]}",
            "mode": "enabled",
            "bootstrapServers": bootstrap,
            "transactionalIdPrefix": "test",
            "topics": [source],
            "maxOffsetsPerTrigger": BATCH_OFFSETS,
            "transform": {"sql": "SELECT key, value FROM input"},
            "sink": sink,
            "checkpointLocation": str(workdir / "checkpoint"),
            "trigger": {"processingTime": "500ms"},
            **fields,
        }
    )
