"""``python -m tests.campaign`` (``make campaign``): a fault campaign on the three-broker
cluster and the test bed's PostgreSQL, started here if they are not running. Prints
the report's folder; exits 1 if any pipeline's output is not exact or the system stalled."""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from tests.campaign.campaign import run_campaign
from tests.campaign.rig import CampaignSize
from tests.support.kafka_cluster import KafkaCluster
from tests.support.testbed import ROOT, ScriptedService


def main() -> int:
    parser = argparse.ArgumentParser(prog="make campaign", description=__doc__)
    defaults = CampaignSize()
    parser.add_argument("--faults", type=int, default=1000)
    parser.add_argument("--streams", type=int, default=defaults.streams)
    parser.add_argument(
        "--per-stream", type=int, default=defaults.per_stream, help="records per stream"
    )
    parser.add_argument(
        "--batch", type=int, default=defaults.batch, help="records per task poll while struck"
    )
    parser.add_argument("--poll-ms", type=int, default=defaults.poll_ms)
    parser.add_argument(
        "--kit-records", type=int, default=defaults.kit_records,
        help="the scale of the files, kafka and postgres-incrementing sources' loads",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--no-spark", action="store_true", help="sources only")
    parser.add_argument(
        "--pause", type=float, nargs=2, default=(0.1, 0.5), metavar=("MIN", "MAX"),
        help="seconds between faults, drawn at random",
    )  # fmt: skip
    parser.add_argument(
        "--out", type=Path, default=ROOT / ".onceflow" / "campaign" / time.strftime("%Y%m%d-%H%M%S")
    )
    args = parser.parse_args()
    size = CampaignSize(
        streams=args.streams,
        per_stream=args.per_stream,
        batch=args.batch,
        poll_ms=args.poll_ms,
        kit_records=args.kit_records,
        spark=not args.no_spark,
    )
    services = [ScriptedService("kafka-cluster.sh"), ScriptedService("postgres.sh")]
    bootstrap, dsn = (service.ensure_up() for service in services)
    cluster = KafkaCluster(bootstrap)
    try:
        with tempfile.TemporaryDirectory(prefix="campaign-") as workdir:
            result = run_campaign(
                cluster, dsn, Path(workdir), args.out, size, args.faults, args.seed,
                pause_s=(args.pause[0], args.pause[1]),
            )  # fmt: skip
    finally:
        cluster.restore()  # a broker an interrupted strike left killed or paused
        for service in services:
            service.release()
    print((result.folder / "summary.md").read_text())
    print(f"report: {result.folder}; {len(result.missed)} of {len(result.strikes)} faults missed")
    return 0 if result.exact else 1


if __name__ == "__main__":
    raise SystemExit(main())
