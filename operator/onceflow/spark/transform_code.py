"""Finds a SparkJob's Python transform: in the image, or in ``transform.configMap``'s
files mounted on the driver. Those files are also handed to Spark (``addPyFile``) so
that UDFs defined in them import on the executors, which have no such mount."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from onceflow.api.spark import Transform


class TransformNotFoundError(LookupError):
    """The module or function named in spec.transform is not there."""


def _ship(spark: Any, directory: Path) -> list[str]:
    files = sorted(p for p in directory.iterdir() if p.suffix == ".py" and p.is_file())
    for path in files:
        spark.sparkContext.addPyFile(str(path))
    if str(directory) not in sys.path:
        sys.path.insert(0, str(directory))
    return [p.name for p in files]


def transform_function(
    spark: Any, transform: Transform, directory: str | None
) -> Callable[[Any], Any]:
    """``transform.function`` of ``transform.module``; raises TransformNotFoundError
    naming the field and what was looked at."""
    assert transform.module is not None
    where = "the image"
    if directory is not None:
        if not Path(directory).is_dir():
            raise TransformNotFoundError(
                f"spec.transform.configMap: {transform.config_map!r} is not mounted at "
                f"{directory} (onceflow run does not mount ConfigMaps: put the module on "
                "PYTHONPATH and leave configMap out)"
            )
        shipped = _ship(spark, Path(directory))
        where = f"configMap {transform.config_map!r} (files: {', '.join(shipped) or 'none'})"
    try:
        module = importlib.import_module(transform.module)
    except ModuleNotFoundError as error:
        if error.name is None or not transform.module.startswith(error.name):
            raise  # the module itself imports something missing: its own traceback says what
        raise TransformNotFoundError(
            f"spec.transform.module: no module {transform.module!r} in {where}"
        ) from None
    function = getattr(module, transform.function, None)
    if not callable(function):
        raise TransformNotFoundError(
            f"spec.transform.function: module {transform.module!r} has no function "
            f"{transform.function!r}"
        )
    return function  # type: ignore[no-any-return]
