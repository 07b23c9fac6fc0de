"""``files``: append-only files matched by glob patterns, one record per line (or per
fixed-size record), exactly once.

The source partition is the file's path and the offset the byte position after the
last record taken, stored in the transaction that writes the record; the file's inode
goes with it. Files must be append-only: a file found shorter than the stored position
(truncated) or under another inode (replaced, e.g. by log rotation that reuses the
name) stops the task with an error naming the file, instead of being read again from
the start or skipped. A line is taken only once its newline is written, so a writer
caught mid-line is never split. New files are picked up by rescanning the patterns.

Tasks split the files between them by a hash of the path, each scanning for its own,
so the task configs depend on the config alone.
"""

from __future__ import annotations

import glob
import os
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, BinaryIO

from onceflow.api.connector import (
    ConfigProblem,
    ConnectorError,
    SourceConnector,
    SourceRecord,
    SourceTask,
    TaskContext,
)
from onceflow.connectors.settings import (
    integer_problems,
    is_int,
    same_config_per_task,
    unknown_settings,
)

DEFAULTS: dict[str, Any] = {
    "paths": None,
    "format": "lines",
    "recordBytes": None,
    "key": "file",
    "batchSize": 1000,
    "scanIntervalMs": 1000,
    "maxLineBytes": 1024 * 1024,
}
FORMATS = ("lines", "fixed")
KEYS = ("file", "none")
READ_CHUNK = 256 * 1024
HEAD_BYTES = 4096


def directory_problem(pattern: str) -> str | None:
    """Why the directory of ``pattern`` cannot be scanned (when it has no wildcard)."""
    directory = os.path.dirname(pattern) or "."
    if glob.has_magic(directory):
        return None
    if not os.path.isdir(directory):
        return (
            f"directory {directory} of {pattern!r} does not exist in the task; mount it "
            "(KafkaSource spec.volumes) or fix the pattern"
        )
    if not os.access(directory, os.R_OK | os.X_OK):
        return (
            f"directory {directory} of {pattern!r} is not readable by uid {os.getuid()}; "
            "fix its permissions (or the volume's fsGroup)"
        )
    return None


class FileChangedError(ConnectorError):
    """A file was truncated or replaced after records of it were written, or cannot be
    read as configured."""


def owner_task(path: str, task_count: int) -> int:
    """The task that reads ``path`` (stable across processes)."""
    return zlib.crc32(path.encode()) % task_count


def _head(path: str, size: int) -> tuple[int, int]:
    """A file's identity beyond its inode (which a deleted file's successor may get):
    the CRC-32 of its first bytes, and how many. An append-only file's first bytes
    never change."""
    count = min(size, HEAD_BYTES)
    with open(path, "rb") as file:
        return zlib.crc32(file.read(count)), count


@dataclass
class TrackedFile:
    path: str
    inode: int
    position: int
    head: tuple[int, int] | None = None
    """(crc, bytes) once the file has bytes; stored with every offset."""
    handle: BinaryIO | None = None

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None


class FilesTask(SourceTask):
    """Reads its files from the stored positions, rescanning for new ones."""

    def start(self, context: TaskContext) -> None:
        super().start(context)
        config = {**DEFAULTS, **context.config}
        self.patterns: list[str] = list(config["paths"])
        self.fixed: int | None = config["recordBytes"] if config["format"] == "fixed" else None
        self.keyed = config["key"] == "file"
        self.batch_size: int = config["batchSize"]
        self.scan_s = int(config["scanIntervalMs"]) / 1000
        self.max_line: int = config["maxLineBytes"]
        self.task_count: int = config["taskCount"]
        self.files: dict[str, TrackedFile] = {}
        self.next_first = 0
        self.scanned_at = float("-inf")

    def _scan(self) -> None:
        self.scanned_at = time.monotonic()
        for pattern in self.patterns:
            self._check_directory(pattern)
            for path in sorted(glob.glob(pattern)):
                if path in self.files or not os.path.isfile(path):
                    continue
                if owner_task(path, self.task_count) != self.context.task_id:
                    continue
                self.files[path] = self._resume(path)

    @staticmethod
    def _check_directory(pattern: str) -> None:
        if problem := directory_problem(pattern):
            raise FileChangedError(f"config.paths: {problem}")

    def _resume(self, path: str) -> TrackedFile:
        try:
            inode = os.stat(path).st_ino
        except OSError as error:
            raise FileChangedError(f"config.paths: {path}: {error}") from error
        for other in self.files.values():
            if other.inode == inode and self._same_file(other, path):
                raise FileChangedError(
                    f"config.paths: {path} is {other.path} under another name (renamed or "
                    "linked); matched files must keep their names, or records would repeat"
                )
        stored = self.context.offsets.offset({"file": path})
        if stored is None:
            return TrackedFile(path, inode, 0)
        head = (int(stored["head"]), int(stored["headBytes"])) if "head" in stored else None
        tracked = TrackedFile(path, int(stored["inode"]), int(stored["position"]), head)
        self._check(tracked, verify_content=True)
        return tracked

    @staticmethod
    def _same_file(known: TrackedFile, path: str) -> bool:
        """A link to ``known``, or ``known`` renamed (its old name gone, its first bytes
        the same: a new file that only reused the inode starts differently)."""
        try:
            return os.path.samefile(known.path, path)
        except FileNotFoundError:
            return known.head is not None and _head(path, known.head[1]) == known.head

    def _changed(self, tracked: TrackedFile, what: str) -> FileChangedError:
        return FileChangedError(
            f"config.paths: {tracked.path} {what} after {tracked.position} bytes of it were "
            "written; files must be append-only: give new data a new file name"
        )

    def _check(self, tracked: TrackedFile, verify_content: bool = False) -> int | None:
        """The file's size, or None once it is gone (deleted after reading is normal
        clean-up). ``verify_content``: at resume, also its first bytes and (lines) the
        newline before the stored position, which a successor under a reused inode
        would not have."""
        try:
            found = os.stat(tracked.path)
        except FileNotFoundError:
            return None
        if found.st_ino != tracked.inode:
            raise self._changed(tracked, f"was replaced (inode {tracked.inode} -> {found.st_ino})")
        if found.st_size < tracked.position:
            raise self._changed(tracked, f"was truncated to {found.st_size} bytes")
        if verify_content and tracked.position:
            if tracked.head is not None and _head(tracked.path, tracked.head[1]) != tracked.head:
                raise self._changed(tracked, "was replaced (its first bytes differ)")
            if not self.fixed:
                with open(tracked.path, "rb") as file:
                    file.seek(tracked.position - 1)
                    if file.read(1) != b"\n":
                        raise self._changed(tracked, "was replaced (no line ends there)")
        return found.st_size

    def poll(self) -> list[SourceRecord]:
        if time.monotonic() - self.scanned_at >= self.scan_s:
            self._scan()
        records: list[SourceRecord] = []
        tracked_files = list(self.files.values())
        # A different file first each time: one with a long backlog never starves others.
        self.next_first = (self.next_first + 1) % max(1, len(tracked_files))
        for tracked in tracked_files[self.next_first :] + tracked_files[: self.next_first]:
            if len(records) >= self.batch_size:
                break
            size = self._check(tracked)
            if size is None:
                records += self._drain_deleted(tracked, self.batch_size - len(records))
            elif size > tracked.position:
                records += self._read(tracked, self.batch_size - len(records))
        return records

    def _drain_deleted(self, tracked: TrackedFile, limit: int) -> list[SourceRecord]:
        """What a deleted file still holds is read through the handle left open; then
        the file is dropped."""
        records = self._read(tracked, limit, reopen=False) if tracked.handle else []
        if not records:
            tracked.close()
            del self.files[tracked.path]
        return records

    def _read(self, tracked: TrackedFile, limit: int, reopen: bool = True) -> list[SourceRecord]:
        """Up to ``limit`` complete records from the stored position; a record still
        being written stays for a later poll. The handle is closed at the end of what
        is there, so idle files hold no descriptor."""
        if tracked.handle is None and reopen:
            tracked.handle = self._open(tracked)
        assert tracked.handle is not None
        tracked.handle.seek(tracked.position)
        data, start = b"", 0
        records: list[SourceRecord] = []
        while len(records) < limit:
            end = self._record_end(tracked, data, start)
            if end is None:
                more = tracked.handle.read(READ_CHUNK)
                if not more:
                    if reopen:
                        tracked.close()
                    break
                data, start = data[start:] + more, 0
                continue
            body = data[start:end] if self.fixed else data[start : end - 1]
            tracked.position += end - start
            records.append(self._record(tracked, body))
            start = end
        return records

    def _open(self, tracked: TrackedFile) -> BinaryIO:
        try:
            handle = open(tracked.path, "rb")  # noqa: SIM115 - kept open while reading
        except OSError as error:
            raise FileChangedError(f"config.paths: {tracked.path}: {error}") from error
        found = os.fstat(handle.fileno())
        if found.st_ino != tracked.inode:
            handle.close()
            raise self._changed(tracked, f"was replaced (inode {tracked.inode} -> {found.st_ino})")
        if tracked.head is None and found.st_size:
            tracked.head = _head(tracked.path, found.st_size)
        return handle

    def _record_end(self, tracked: TrackedFile, data: bytes, start: int) -> int | None:
        """End (exclusive) of the next complete record in ``data`` from ``start``."""
        if self.fixed:
            return start + self.fixed if len(data) - start >= self.fixed else None
        newline = data.find(b"\n", start)
        if newline >= 0:
            return newline + 1
        if len(data) - start > self.max_line:
            raise FileChangedError(
                f"config.maxLineBytes: {tracked.path} has a line longer than "
                f"{self.max_line} bytes at byte {tracked.position}; raise maxLineBytes"
            )
        return None

    def _record(self, tracked: TrackedFile, body: bytes) -> SourceRecord:
        offset: dict[str, int] = {"position": tracked.position, "inode": tracked.inode}
        if tracked.head is not None:
            offset["head"], offset["headBytes"] = tracked.head
        return SourceRecord(
            source_partition={"file": tracked.path},
            source_offset=offset,
            key=tracked.path.encode() if self.keyed else None,
            value=body,
        )

    def stop(self) -> None:
        for tracked in self.files.values():
            tracked.close()


class FilesConnector(SourceConnector):
    """Byte positions stored with the records make every restart resume exactly."""

    task_class = FilesTask

    def check(
        self,
        config: Mapping[str, Any],
        secrets: Mapping[str, str],
        *,
        shares_task_filesystem: bool,
    ) -> list[ConfigProblem]:
        if not shares_task_filesystem:
            return []  # the files live on the task pods' volumes
        found = (directory_problem(pattern) for pattern in config["paths"])
        return [ConfigProblem("paths", problem) for problem in found if problem]

    def validate(self, config: Mapping[str, Any]) -> list[ConfigProblem]:
        problems = unknown_settings(config, DEFAULTS)
        merged = {**DEFAULTS, **config}
        paths = merged["paths"]
        if not (
            isinstance(paths, list)
            and paths
            and all(isinstance(p, str) and os.path.isabs(p) for p in paths)
        ):
            problems.append(
                ConfigProblem("paths", "a non-empty list of absolute paths or glob patterns")
            )
        if merged["format"] not in FORMATS:
            problems.append(ConfigProblem("format", "lines or fixed"))
        elif merged["format"] == "fixed" and not is_int(merged["recordBytes"], 1):
            problems.append(ConfigProblem("recordBytes", "format fixed needs an integer >= 1"))
        elif merged["format"] == "lines" and merged["recordBytes"] is not None:
            problems.append(ConfigProblem("recordBytes", "only for format fixed"))
        if merged["key"] not in KEYS:
            problems.append(ConfigProblem("key", "file (the path) or none"))
        problems += integer_problems(
            merged, {"batchSize": 1, "scanIntervalMs": 100, "maxLineBytes": 1}
        )
        return problems

    def task_configs(self, config: Mapping[str, Any], max_tasks: int) -> list[dict[str, Any]]:
        return same_config_per_task(DEFAULTS, config, max_tasks)

    def exactly_once_support(self, config: Mapping[str, Any]) -> bool:
        return True
