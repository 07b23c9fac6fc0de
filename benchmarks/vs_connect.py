"""Onceflow's exactly-once source against Kafka Connect's, side by side: the same
counting work (Onceflow's `sequence`; benchmarks/connect's CountingSourceConnector,
the same records byte for byte), the same task count, record size and transaction
boundary (one transaction per poll), the same broker, runs interleaved.

Usage: make kafka-up && bash scripts/connect.sh up && .venv/bin/python benchmarks/vs_connect.py
Target: Onceflow >= 1.2 x Connect in every case. Rates are the steady state: records
between 10 % and 90 % of the output, so start-up (a JVM's warm-up, Python's imports)
counts for neither.
"""

from __future__ import annotations

import argparse
import time
import uuid

from _harness import JSON_OVERHEAD, connect_rest, onceflow_run, steady

from onceflow.eos.consume import end_offsets
from onceflow.eos.topics import ensure_topic

CASES = [(100, 1000), (1024, 1000), (100, 100)]
TASKS = 3
STREAMS = 6
PARTITIONS = 3
QUIET_S = 3.0


def steady_rate(bootstrap: str, topic: str, records: int) -> float:
    """Records/s between 10 % and 90 % of the topic's final end offsets (which count
    the transactions' commit markers too; the rate is scaled back to records)."""
    samples: list[tuple[float, int]] = []
    last_growth = time.monotonic()
    while True:
        now, end = time.monotonic(), sum(end_offsets(bootstrap, topic).values())
        if not samples or end > samples[-1][1]:
            last_growth = now
        samples.append((now, end))
        if end >= records and now - last_growth > QUIET_S:
            break
        if now - last_growth > 120:
            raise TimeoutError(f"{topic}: stuck at {end} offsets, {records} records expected")
        time.sleep(0.1)
    final = samples[-1][1]
    return steady(samples, 0, final) * records / final


def onceflow_rate(bootstrap: str, size: int, poll: int, records: int) -> float:
    name = f"vs-{uuid.uuid4().hex[:6]}"
    topic = f"{name}.out"
    ensure_topic(bootstrap, topic, partitions=PARTITIONS)
    source = {
        "topic": topic,
        "tasksMax": TASKS,
        "exactlyOnceSupport": "required",
        "transactionBoundary": "poll",
        "connector": {
            "type": "sequence",
            "config": {
                "streams": STREAMS,
                "limit": records // STREAMS,
                "batchSize": poll,
                "padBytes": max(0, size - JSON_OVERHEAD),
            },
        },
    }
    with onceflow_run(bootstrap, name, source):
        return steady_rate(bootstrap, topic, records)


def connect_rate(worker: str, bootstrap: str, size: int, poll: int, records: int) -> float:
    name = f"vs-{uuid.uuid4().hex[:6]}"
    topic = f"{name}.out"
    ensure_topic(bootstrap, topic, partitions=PARTITIONS)
    config = {
        "connector.class": "io.onceflow.bench.CountingSourceConnector",
        "tasks.max": str(TASKS),
        "exactly.once.support": "required",
        "transaction.boundary": "poll",
        "topic": topic,
        "streams": str(STREAMS),
        "limit": str(records // STREAMS),
        "batch.size": str(poll),
        "pad.bytes": str(max(0, size - JSON_OVERHEAD)),
    }
    connect_rest(f"{worker}/connectors", "POST", {"name": name, "config": config})
    try:
        return steady_rate(bootstrap, topic, records)
    finally:
        connect_rest(f"{worker}/connectors/{name}", "DELETE")


def _case(text: str) -> tuple[int, int]:
    size, _, poll = text.partition("x")
    return int(size), int(poll)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--worker", default="http://127.0.0.1:18083")
    parser.add_argument("--records", type=int, default=600_000)
    parser.add_argument("--rounds", type=int, default=2, help="interleaved runs per side")
    parser.add_argument(
        "--case",
        action="append",
        metavar="BYTESxPOLL",
        help="only these cases (e.g. 100x100; repeatable), default: all",
    )
    args = parser.parse_args()
    cases = CASES if not args.case else [_case(text) for text in args.case]
    print(f"{TASKS} tasks, {STREAMS} streams, {args.records:,} records, poll boundary")
    # A Connect worker runs for weeks: measured cold, its JIT had not compiled the task's
    # path yet, and the first case read 1.25 where a warm worker reads 0.93-0.96. One
    # unmeasured run of each side first (the same for both, though Python has no JIT).
    size, poll = cases[0]
    onceflow_rate(args.bootstrap, size, poll, args.records)
    connect_rate(args.worker, args.bootstrap, size, poll, args.records)
    print(f"{'record':>7} {'poll':>5} {'onceflow/s':>11} {'connect/s':>10} {'ratio':>6}")
    for size, poll in cases:
        ours = theirs = 0.0
        for _ in range(args.rounds):
            ours = max(ours, onceflow_rate(args.bootstrap, size, poll, args.records))
            theirs = max(
                theirs, connect_rate(args.worker, args.bootstrap, size, poll, args.records)
            )
        print(f"{size:>6}B {poll:>5} {ours:>11,.0f} {theirs:>10,.0f} {ours / theirs:>6.2f}")


if __name__ == "__main__":
    main()
