"""A transform module from ``transform.configMap`` on a real SparkSession: the driver
imports, and Spark ships to executors, a copy taken at start, never the mounted files,
which a ConfigMap edit changes in place under a running driver."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from onceflow.api.spark import Transform
from onceflow.spark.transform_code import transform_function

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark]


def test_the_driver_ships_a_copy_of_the_mounted_code_taken_at_start(
    spark: SparkSession, tmp_path: Path
) -> None:
    mount = tmp_path / "transform"
    mount.mkdir()
    module = "import pathlib\nVERSION = 1\ndef transform(frame):\n    return frame\n"
    module += "LOOKUP = (pathlib.Path(__file__).parent / 'lookup.json').read_text()\n"
    (mount / "copied_shape.py").write_text(module)
    (mount / "lookup.json").write_text("{}")
    transform = Transform(module="copied_shape", config_map="code")
    try:
        transform_function(spark, transform, str(mount))
        (mount / "copied_shape.py").write_text("VERSION = 2\n")  # the ConfigMap edited
        assert sys.modules["copied_shape"].LOOKUP == "{}", "a data file beside the module"
        shipped = [f for f in spark.sparkContext.listFiles if "copied_shape" in f]
        assert shipped, "the module was not handed to Spark for the executors"
        assert not [f for f in shipped if str(mount) in f], shipped
        assert all("VERSION = 1" in Path(f.removeprefix("file:")).read_text() for f in shipped)
    finally:
        sys.modules.pop("copied_shape", None)
