"""Transactional (enabled) vs. idempotent (disabled) source throughput, each against
its ceiling -- a plain confluent-kafka loop producing the same JSON records in the same
mode (one transaction per poll-sized batch when transactional) -- and read_committed
vs. read_uncommitted consumer throughput, measured side by side.

Usage: make kafka-up && .venv/bin/python benchmarks/source_throughput.py [--bootstrap B]
       [--profile SIZE,POLL,MODE]  (one task run under cProfile: where its time goes)
Targets: txn/idempotent >= 0.95 at 1 KB x 1000-record polls, >= 0.85 at 100 B, and
>= 0.90 at 100-record polls with a 100 ms interval boundary; the task >= 0.80 of the
raw loop in the same mode.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time
import uuid

from _harness import JSON_OVERHEAD, run_source
from confluent_kafka import Consumer, Producer, TopicPartition

from onceflow.api import ExactlyOnceMode
from onceflow.connectors.sequence import StreamBodies
from onceflow.eos.consume import end_offsets
from onceflow.eos.topics import ensure_topic

CASES = [(100, 100), (100, 1000), (1024, 100), (1024, 1000)]
# The interval boundary's case: small polls, one transaction per interval.
INTERVAL_MS = 100


def raw_rate(bootstrap: str, mode: ExactlyOnceMode, records: int, size: int, batch: int) -> float:
    """The ceiling: records built and JSON-encoded as the sequence connector builds
    them, produced by one producer with nothing else (no offsets, no framework)."""
    topic = f"bench-raw-{uuid.uuid4().hex[:8]}"
    ensure_topic(bootstrap, topic, partitions=-1)  # as the task creates its topic
    transactional = mode is ExactlyOnceMode.ENABLED
    config = {"bootstrap.servers": bootstrap, "enable.idempotence": True, "log_level": 4}
    if transactional:
        config["transactional.id"] = topic
    producer = Producer(config)
    if transactional:
        producer.init_transactions(30)
    pad = "x" * max(0, size - JSON_OVERHEAD)
    streams = ("s0", "s1", "s2", "s3")
    bodies = [StreamBodies(stream, pad) for stream in streams]
    started = time.perf_counter()
    for first in range(0, records, batch):
        if transactional:
            producer.begin_transaction()
        for n in range(first, min(first + batch, records)):
            stream = streams[n % 4]
            value = bodies[n % 4].value(n // 4 + 1)
            while True:
                try:
                    producer.produce(topic, value, stream.encode())
                    break
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0)
        if transactional:
            producer.commit_transaction(60)
    producer.flush(60)
    return records / (time.perf_counter() - started)


def consume_rate(bootstrap: str, topic: str, isolation: str) -> float:
    ends = end_offsets(bootstrap, topic)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "log_level": 4,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in ends])
    target = sum(ends.values())
    seen = 0
    started = time.perf_counter()
    while seen < target * 0.99:  # control records occupy offsets but are never delivered
        seen += sum(1 for m in consumer.consume(1000, 1.0) if m.error() is None)
    elapsed = time.perf_counter() - started
    consumer.close()
    return seen / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=2, help="interleaved runs per mode")
    parser.add_argument("--profile", help="SIZE,POLL,MODE: profile one task run instead")
    args = parser.parse_args()
    if args.profile:
        size, batch, mode = args.profile.split(",")
        profile = cProfile.Profile()
        run = run_source(
            args.bootstrap, ExactlyOnceMode(mode), args.records, int(size), int(batch), profile
        )
        print(f"{run.rate:,.0f} records/s under the profiler (start-up {run.startup_s:.2f} s)")
        pstats.Stats(profile).sort_stats("tottime").print_stats(25)
        return

    modes = (ExactlyOnceMode.DISABLED, ExactlyOnceMode.ENABLED)
    print(
        f"{'record':>7} {'poll':>5} {'idempotent/s':>13} {'raw/s':>9} {'/raw':>5} "
        f"{'transactional/s':>16} {'raw/s':>9} {'/raw':>5} {'txn/idem':>9}"
    )
    last_topic = ""
    startups: list[float] = []
    for size, batch in CASES:
        task = dict.fromkeys(modes, 0.0)
        raw = dict.fromkeys(modes, 0.0)
        for _ in range(args.rounds):
            for mode in modes:  # interleaved: machine drift hits every column alike
                run = run_source(args.bootstrap, mode, args.records, size, batch)
                task[mode] = max(task[mode], run.rate)
                startups.append(run.startup_s)
                ceiling = raw_rate(args.bootstrap, mode, args.records, size, batch)
                raw[mode] = max(raw[mode], ceiling)
                if mode is ExactlyOnceMode.ENABLED:
                    last_topic = run.topic
        columns = " ".join(
            f"{task[m]:>{w},.0f} {raw[m]:>9,.0f} {task[m] / raw[m]:>5.2f}"
            for m, w in zip(modes, (13, 16), strict=True)
        )
        ratio = task[ExactlyOnceMode.ENABLED] / task[ExactlyOnceMode.DISABLED]
        print(f"{size:>6}B {batch:>5} {columns} {ratio:>9.2f}")
    print(
        "task rates run from the task's start (topics checked, offsets read, producer "
        "initialised), as the raw loops' run from their producer's; the start itself took "
        f"{statistics.median(startups):.2f} s (median, max {max(startups):.2f} s)"
    )

    interval = dict.fromkeys(modes, 0.0)
    for _ in range(args.rounds):
        for mode in modes:
            run = run_source(args.bootstrap, mode, args.records, 100, 100, interval_ms=INTERVAL_MS)
            interval[mode] = max(interval[mode], run.rate)
    print(
        f"\ntransactionBoundary interval {INTERVAL_MS} ms, 100 B x 100-record polls: "
        f"transactional {interval[ExactlyOnceMode.ENABLED]:,.0f}/s, idempotent "
        f"{interval[ExactlyOnceMode.DISABLED]:,.0f}/s, txn/idem "
        f"{interval[ExactlyOnceMode.ENABLED] / interval[ExactlyOnceMode.DISABLED]:.2f}"
    )

    committed = uncommitted = 0.0
    for _ in range(args.rounds):
        uncommitted = max(uncommitted, consume_rate(args.bootstrap, last_topic, "read_uncommitted"))
        committed = max(committed, consume_rate(args.bootstrap, last_topic, "read_committed"))
    print(
        f"\nconsumer on a transactional topic: read_committed {committed:,.0f}/s, "
        f"read_uncommitted {uncommitted:,.0f}/s, ratio {committed / uncommitted:.2f}"
    )


if __name__ == "__main__":
    main()
