"""Files a driver reads beside Spark's own (checkpoint logs, a sink's log), through
Hadoop's file system, so a checkpoint or output on S3 is read as one on a volume."""

from __future__ import annotations

from typing import Any


def _file_system(spark: Any, directory: str) -> tuple[Any, Any]:
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(directory)
    return path, path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())


def last_batch(spark: Any, directory: str) -> int:
    """The largest batch id logged in ``directory`` (``N`` or ``N.compact`` files, as
    Spark's logs name them); -1 for none."""
    path, fs = _file_system(spark, directory)
    if not fs.exists(path):
        return -1
    ids = [
        int(stem)
        for status in fs.listStatus(path)
        if (stem := str(status.getPath().getName()).removesuffix(".compact")).isdigit()
    ]
    return max(ids, default=-1)


def read_text(spark: Any, file: str) -> str:
    path, fs = _file_system(spark, file)
    stream = fs.open(path)
    try:
        # py4j copies arrays into Java: read into one the JVM returns.
        raw = spark.sparkContext._jvm.org.apache.commons.io.IOUtils.toByteArray(stream)
        return bytes(raw).decode()
    finally:
        stream.close()


def names_in(spark: Any, directory: str) -> list[str]:
    """The entries of ``directory`` (none when it does not exist)."""
    path, fs = _file_system(spark, directory)
    if not fs.exists(path):
        return []
    return [str(status.getPath().getName()) for status in fs.listStatus(path)]


def exists(spark: Any, file: str) -> bool:
    path, fs = _file_system(spark, file)
    return bool(fs.exists(path))


def replace_text(spark: Any, file: str, text: str) -> None:
    """Writes ``file`` whole (a reader sees the old or the new text on stores with an
    atomic overwrite; the caller never depends on more than one writer)."""
    path, fs = _file_system(spark, file)
    stream = fs.create(path, True)
    try:
        stream.write(bytearray(text.encode()))
        stream.hsync()
    finally:
        stream.close()
