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
    (mount / "copied_shape.py").write_text("VERSION = 1\ndef transform(frame):\n    return frame\n")
    transform = Transform(module="copied_shape", config_map="code")
    try:
        function = transform_function(spark, transform, str(mount))
        (mount / "copied_shape.py").write_text("VERSION = 2\n")  # the ConfigMap edited
        module = sys.modules["copied_shape"]
        assert module.VERSION == 1 and function.__module__ == "copied_shape"
        shipped = [f for f in spark.sparkContext.listFiles if "copied_shape" in f]
        assert shipped, "the module was not handed to Spark for the executors"
        assert not [f for f in shipped if str(mount) in f], shipped
        assert all("VERSION = 1" in Path(f.removeprefix("file:")).read_text() for f in shipped)
    finally:
        sys.modules.pop("copied_shape", None)
