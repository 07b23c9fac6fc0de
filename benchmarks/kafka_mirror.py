"""The kafka connector against the raw ceiling: a plain confluent-kafka loop that
consumes read_committed and produces in transactions of the same size (no offsets
kept, so nothing it copies survives a crash exactly once), side by side on one topic.

Usage: make kafka-up && .venv/bin/python benchmarks/kafka_mirror.py [--bootstrap B]
Reported: records/s of each and mirror / raw, per record size.
"""

from __future__ import annotations

import argparse
import time
import uuid

from _harness import run_task
from confluent_kafka import Consumer, Producer, TopicPartition

from onceflow.api import ExactlyOnceMode
from onceflow.connectors.kafka_mirror import KafkaMirrorConnector
from onceflow.eos.topics import ensure_topic

PARTITIONS = 4
BATCH = 1000


def fill(bootstrap: str, records: int, size: int) -> str:
    topic = f"bench-mirror-in-{uuid.uuid4().hex[:8]}"
    ensure_topic(bootstrap, topic, partitions=PARTITIONS)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "log_level": 4})
    value = b"x" * size
    for n in range(records):
        while True:
            try:
                producer.produce(topic, value, str(n % 64).encode())
                break
            except BufferError:
                producer.poll(0.1)
    producer.flush(60)
    return topic


def raw_rate(bootstrap: str, source: str, records: int) -> float:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "log_level": 4,
        }
    )
    consumer.assign([TopicPartition(source, p, 0) for p in range(PARTITIONS)])
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": uuid.uuid4().hex, "log_level": 4}
    )
    producer.init_transactions(30)
    target, copied = f"bench-raw-out-{uuid.uuid4().hex[:8]}", 0
    ensure_topic(bootstrap, target, partitions=-1)  # as the task creates its topic
    started = time.perf_counter()
    while copied < records:
        batch = [m for m in consumer.consume(BATCH, 1.0) if m.error() is None]
        if not batch:
            continue
        producer.begin_transaction()
        for m in batch:
            producer.produce(target, m.value(), m.key(), headers=m.headers())
        producer.commit_transaction(30)
        copied += len(batch)
    elapsed = time.perf_counter() - started
    consumer.close()
    return copied / elapsed


def mirror_rate(bootstrap: str, source: str, records: int) -> float:
    config = {
        "topics": [source],
        "bootstrapServers": bootstrap,
        "batchSize": BATCH,
        "taskCount": 1,
    }
    return run_task(
        bootstrap, ExactlyOnceMode.ENABLED, KafkaMirrorConnector(), "kafka", config, records
    ).rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=2, help="interleaved runs of each")
    args = parser.parse_args()
    print(f"{'record':>7} {'raw/s':>9} {'mirror/s':>9} {'ratio':>6}")
    for size in (100, 1024):
        source = fill(args.bootstrap, args.records, size)
        raw = mirror = 0.0
        for _ in range(args.rounds):  # interleaved: machine drift hits both alike
            raw = max(raw, raw_rate(args.bootstrap, source, args.records))
            mirror = max(mirror, mirror_rate(args.bootstrap, source, args.records))
        print(f"{size:>6}B {raw:>9.0f} {mirror:>9.0f} {mirror / raw:>6.2f}")


if __name__ == "__main__":
    main()
