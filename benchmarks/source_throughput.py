"""Transactional (enabled) vs. idempotent (disabled) source throughput, and
read_committed vs. read_uncommitted consumer throughput, measured side by side.

Usage: make kafka-up && .venv/bin/python benchmarks/source_throughput.py [--bootstrap B]
Targets: txn/idempotent >= 0.95 at 1 KB x 1000-record polls, >= 0.85 at 100 B.
"""

from __future__ import annotations

import argparse
import time
import uuid

from _harness import run_source
from confluent_kafka import Consumer, TopicPartition

from onceflow.api import ExactlyOnceMode
from onceflow.eos.consume import end_offsets

CASES = [(100, 100), (100, 1000), (1024, 100), (1024, 1000)]


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
    args = parser.parse_args()

    print(f"{'record':>7} {'poll':>5} {'idempotent/s':>13} {'transactional/s':>16} {'ratio':>6}")
    last_topic = ""
    for size, batch in CASES:
        best = {ExactlyOnceMode.DISABLED: 0.0, ExactlyOnceMode.ENABLED: 0.0}
        for _ in range(args.rounds):
            for mode in list(best):  # interleaved: machine drift hits both modes alike
                rate, topic = run_source(args.bootstrap, mode, args.records, size, batch)
                best[mode] = max(best[mode], rate)
                if mode is ExactlyOnceMode.ENABLED:
                    last_topic = topic
        idem, txn = best[ExactlyOnceMode.DISABLED], best[ExactlyOnceMode.ENABLED]
        print(f"{size:>6}B {batch:>5} {idem:>13,.0f} {txn:>16,.0f} {txn / idem:>6.2f}")

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
