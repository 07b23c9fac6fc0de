"""Time to fence 1, 10 and 100 transactional ids in parallel (target: 100 ids <= 1 s),
next to fencing the same ids one after another, measured in the same run.

Usage: make kafka-up && .venv/bin/python benchmarks/fencing.py [--bootstrap B]
"""

from __future__ import annotations

import argparse
import time
import uuid

from onceflow.eos.fencing import fence_one, fence_transactional_ids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    args = parser.parse_args()
    print(f"{'ids':>4} {'parallel s':>11} {'sequential s':>13} {'speed-up':>9}")
    for count in (1, 10, 100):
        prefix = f"bench-fence-{uuid.uuid4().hex[:6]}"
        ids = [f"{prefix}-{i}" for i in range(count)]
        fence_transactional_ids(args.bootstrap, ids)  # first use creates the ids' state
        started = time.perf_counter()
        report = fence_transactional_ids(args.bootstrap, ids)
        parallel = time.perf_counter() - started
        assert report.ok, report.summary()
        started = time.perf_counter()
        for tid in ids:
            assert fence_one(args.bootstrap, tid, None, 30).ok
        sequential = time.perf_counter() - started
        print(f"{count:>4} {parallel:>11.3f} {sequential:>13.3f} {sequential / parallel:>8.1f}x")


if __name__ == "__main__":
    main()
