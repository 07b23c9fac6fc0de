"""The sink identity a checkpoint records (``logic.sink_identity``), read and written
through Hadoop's file system, so a checkpoint on S3 keeps it as one on a volume does.

Each record is a new numbered file (``onceflow-sink/<n>``), created without overwriting
and never renamed, as Spark's own logs are on stores without an atomic rename: the
newest readable file wins. A driver that dies while writing one has written no batch
under it yet, so the record before is still the truth.
"""

from __future__ import annotations

import logging
from typing import Any

from py4j.protocol import Py4JError

from onceflow.logic.sink_identity import SinkIdentity, SinkIdentityError, identity_in_flight

log = logging.getLogger(__name__)

RECORDS = "onceflow-sink"
KEPT = 2
"""Records left after a new one: the newest, and the one before in case the newest is
torn (a record is a few dozen bytes)."""


class CheckpointIdentity:
    """The record of one checkpoint, for one driver; used on the driver only."""

    def __init__(
        self,
        spark: Any,
        checkpoint: str,
        current: SinkIdentity,
        told_previous_prefix: str | None = None,
    ) -> None:
        jvm = spark.sparkContext._jvm
        self._path = jvm.org.apache.hadoop.fs.Path
        self._io = jvm.org.apache.commons.io.IOUtils
        self._directory = self._path(f"{checkpoint.rstrip('/')}/{RECORDS}")
        self._fs = self._directory.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
        self.current = current
        numbered = self._numbered()
        self._next = (numbered[-1][0] + 1) if numbered else 0
        recorded = self._newest_readable(numbered)
        self._claimed = recorded == current
        self.in_flight = identity_in_flight(recorded, current, told_previous_prefix)
        """Where a batch left in flight may have been written, if not under ``current``."""
        if self.in_flight is not None:
            log.warning(
                "the checkpoint %s was last written as %s; a batch left in flight is "
                "finished there, later ones are written as %s",
                checkpoint,
                self.in_flight,
                current,
            )

    def _numbered(self) -> list[tuple[int, Any]]:
        if not self._fs.exists(self._directory):
            return []
        found = [
            (int(name), status.getPath())
            for status in self._fs.listStatus(self._directory)
            if (name := str(status.getPath().getName())).isdigit()
        ]
        return sorted(found, key=lambda entry: entry[0])

    def _read(self, path: Any) -> bytes:
        stream = self._fs.open(path)
        try:
            # py4j copies arrays into Java: read into one the JVM returns.
            return bytes(self._io.toByteArray(stream))
        finally:
            stream.close()

    def _newest_readable(self, numbered: list[tuple[int, Any]]) -> SinkIdentity | None:
        """The newest record that reads back. A torn one was being written by a driver
        that died before it wrote any batch under it, so the one before it (or none, for
        a first record) still says who may have a batch in flight. Past the records kept,
        an unreadable one is damage no driver made, and is not guessed over."""
        for index, (_, path) in enumerate(reversed(numbered)):
            try:
                return SinkIdentity.decode(self._read(path), str(path))
            except (SinkIdentityError, Py4JError):
                if index < KEPT:
                    continue
                raise
        return None

    def claim(self) -> None:
        """Records ``current`` before the first batch written under it (once a driver)."""
        if self._claimed:
            return
        path = self._path(self._directory, str(self._next))
        stream = self._fs.create(path, False)
        try:
            stream.write(bytearray(self.current.encode()))
            stream.hsync()
        finally:
            stream.close()
        self._claimed = True
        self._next += 1
        for _, old in self._numbered()[:-KEPT]:
            self._fs.delete(old, False)
