"""``onceflow transactions list|abort``: find the open transaction that holds every
``read_committed`` consumer of a partition back, and end it.

``list`` looks at both ends of each partition (logic/hanging_transactions.py); with
``--watch`` it keeps looking and names the partitions whose last stable offset never
moved, which no producer timeout the broker enforces has ended. ``abort`` fences a
transactional id: the coordinator aborts its open transaction, and every consumer
stopped at it reads on. It asks for ``--yes`` first, because what the transaction held
is gone: a writer of Onceflow's sends it again from its committed offsets, another
writer only if it retries.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

POLL_S = 1.0

ABORT_COST = (
    "aborting {tid}'s open transaction discards the records it holds: a source task or "
    "sink of Onceflow's sends them again from its committed offsets (nothing is lost), "
    "any other producer loses them unless it retries; the producer holding {tid} is "
    "fenced and its next send fails"
)


def kafka_config_problem(command: str, directory: str | None) -> str | None:
    """``--kafka-config`` names a directory of librdkafka settings, or the command says
    what it expected (``audit`` and ``transactions`` take it alike)."""
    if directory is None or Path(directory).is_dir():
        return None
    return (
        f"onceflow {command}: --kafka-config {directory}: not a directory (one file per "
        "librdkafka setting, as a Pipeline's auth Secret is mounted)"
    )


def _extra(args: argparse.Namespace) -> dict[str, str] | None:
    """The settings of --kafka-config; None (after saying why) when it is no directory."""
    from onceflow.eos.clients import mounted_secret

    if problem := kafka_config_problem(f"transactions {args.action}", args.kafka_config):
        print(problem, file=sys.stderr)
        return None
    return mounted_secret(args.kafka_config)


def _cmd_list(args: argparse.Namespace) -> int:
    from onceflow.eos.partition_ends import partition_ends
    from onceflow.logic.hanging_transactions import hanging, track

    if (extra := _extra(args)) is None:
        return 2
    started = time.monotonic()
    looks = partition_ends(args.bootstrap, args.topic, extra)
    stalls = track({}, looks, started)
    while time.monotonic() - started < args.watch:
        time.sleep(POLL_S)  # the pace of the looks
        looks = partition_ends(args.bootstrap, args.topic, extra)
        stalls = track(stalls, looks, time.monotonic())
    if not looks:
        print(f"no partition found in {', '.join(args.topic)}", file=sys.stderr)
        return 2
    for look in looks:
        state = "open transaction" if look.high > look.stable else "nothing open"
        print(f"{look.topic}/{look.partition}\tLSO {look.stable}\tHW {look.high}\t{state}")
    if not args.watch:
        return 0
    bound = args.watch - POLL_S
    stuck = hanging(stalls, looks, time.monotonic(), dict.fromkeys(args.topic, bound))
    for found in stuck:
        print(f"hanging: {found.describe()}")
    return 1 if stuck else 0


def _cmd_abort(args: argparse.Namespace) -> int:
    from onceflow.eos.fencing import fence_transactional_ids

    if (extra := _extra(args)) is None:
        return 2
    cost = ABORT_COST.format(tid=args.transactional_id)
    if not args.yes:
        print(f"not aborted: {cost}. Add --yes to abort it.", file=sys.stderr)
        return 2
    report = fence_transactional_ids(args.bootstrap, [args.transactional_id], extra=extra)
    print(report.summary())
    return 0 if report.ok else 1


def add_transactions_command(commands: Any) -> None:
    transactions = commands.add_parser(
        "transactions",
        help="find an open transaction that holds consumers back, and abort it",
    )
    actions = transactions.add_subparsers(dest="action", required=True)
    listing = actions.add_parser(
        "list",
        help="each partition's last stable offset and high watermark",
        epilog="exit code 1 when --watch found a hanging transaction",
    )
    listing.add_argument("--topic", action="append", required=True, help="a topic (repeat)")
    listing.add_argument(
        "--watch",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="keep looking this long and name the partitions whose last stable offset "
        "never moved (make it longer than the writers' transaction.timeout.ms)",
    )
    listing.set_defaults(handler=_cmd_list)
    abort = actions.add_parser("abort", help="abort a transactional id's open transaction")
    abort.add_argument("--transactional-id", required=True)
    abort.add_argument("--yes", action="store_true", help="abort, knowing what it costs")
    abort.set_defaults(handler=_cmd_abort)
    for action in (listing, abort):
        action.add_argument("--bootstrap", required=True)
        action.add_argument(
            "--kafka-config",
            metavar="DIR",
            help="librdkafka settings, one file each (a Pipeline's auth Secret, mounted)",
        )
