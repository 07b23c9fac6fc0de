"""The Spark driver's own entry: what ``onceflow spark-job`` runs, without the CLI.

spark-submit runs this file (SparkApplication.mainApplicationFile): the image copies it
to /opt/onceflow/spark-main.py, and it starts the driver directly, as the CLI's
``spark-job`` command does (``cli`` calls ``run_driver``). Going through the CLI module
instead would make the driver import everything the CLI can reach (the operator, the
standalone supervisor, the task process) only to parse two options.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from onceflow.api.driver import SparkJobSettings
from onceflow.processes.lifeline import SUPERVISOR_PID_HELP, die_with_supervisor
from onceflow.processes.stop_signals import unblock_inherited_stop_signals

DESCRIPTION = "run a SparkJob's streaming query"


def run_driver(config: str, supervisor_pid: int | None = None) -> int:
    """Runs the driver of the settings file ``config``; ``supervisor_pid``: the
    ``onceflow run`` to die with (None on a cluster)."""
    from onceflow.spark.job import run_job

    if supervisor_pid is not None:
        die_with_supervisor(supervisor_pid)
    return run_job(SparkJobSettings.model_validate_json(Path(config).read_text()))


def driver_parser() -> argparse.ArgumentParser:
    """The options of ``onceflow spark-job``, for the driver started without the CLI."""
    parser = argparse.ArgumentParser(prog="onceflow spark-job", description=DESCRIPTION)
    parser.add_argument("--config", required=True, help="SparkJobSettings JSON file")
    parser.add_argument("--supervisor-pid", type=int, help=SUPERVISOR_PID_HELP)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # A child of `onceflow run` starts with its parent's stop signals blocked.
    unblock_inherited_stop_signals()
    args = driver_parser().parse_args(argv)
    return run_driver(args.config, args.supervisor_pid)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
