"""Finds a SparkJob's Python transform: in the image, or in ``transform.configMap``'s
files mounted on the driver. Those files are also handed to Spark (``addPyFile``) so
that UDFs defined in them import on the executors, which have no such mount.

A mounted ConfigMap changes in place when it is edited, and Spark serves an added file
from its path whenever an executor asks: so the driver imports and ships a copy taken
at start, and the driver and all its executors run one version of the code (an edit
restarts the driver into the next one)."""

from __future__ import annotations

import importlib
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from onceflow.api.spark import Transform


class TransformNotFoundError(LookupError):
    """The module or function named in spec.transform is not there."""


def _ship(spark: Any, directory: Path) -> list[str]:
    """Copies the ConfigMap's files (data files a module reads beside itself too), puts
    the copy on the driver's path and hands its modules to Spark."""
    copy = Path(tempfile.mkdtemp(prefix="onceflow-transform-"))
    for path in directory.iterdir():
        if path.is_file() and not path.name.startswith("."):  # not the mount's ..data
            shutil.copyfile(path, copy / path.name)
    modules = sorted(p for p in copy.iterdir() if p.suffix == ".py")
    for path in modules:
        spark.sparkContext.addPyFile(str(path))
    sys.path.insert(0, str(copy))
    return [p.name for p in modules]


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
                f"{directory} (a SparkApplication's driver gets its ConfigMaps from the "
                "Spark operator's mutating webhook, which must be enabled)"
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
