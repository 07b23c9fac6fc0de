"""The class archive the suite's drivers start from (tests/support/spark_archive.py)
is one their JVMs can map: were it refused, every driver would silently start at the
old speed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.spark_archive import archive_path, spark_submit_options
from tests.support.testbed import ROOT, spark_jars


def test_a_driver_jvm_maps_the_class_archive() -> None:
    options = spark_submit_options()
    if options is None:
        pytest.fail(f"no class archive at {archive_path()}: make testbed-deps makes it")
    started = subprocess.run(
        [sys.executable, "-m", "tests.support.spark_archive", "--map"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "ONCEFLOW_SPARK_JARS": str(Path(spark_jars()[0]).parent),
            # -Xshare:on: a JVM that cannot map the archive exits instead of going on.
            "SPARK_SUBMIT_OPTS": f"{options} -Xshare:on",
        },
    )
    assert started.returncode == 0, started.stdout[-2000:] + started.stderr[-2000:]
