"""``files``: append-only files matched by glob patterns, one record per line (or per
fixed-size record), exactly once.

The source partition is the file's path and the offset the byte position after the
last record taken, stored in the transaction that writes the record, with what
identifies the content the position was counted in: the inode, and CRCs of the file's
first bytes and of the bytes just before the position (``file_positions``). Files
must be append-only: a file found shorter than the position (truncated), under
another inode (replaced, e.g. by log rotation that reuses the name), or with other
bytes before the position (rewritten in place and grown again, or deleted and
re-created under a reused inode) stops the task with an error naming the file,
instead of being read again from the start or skipped. This is checked before every
read from a position past 0, and in a file that changed without growing, so a change
between two polls stops a running task as one found at a restart does. A line is
taken only once its newline is written, so a writer caught mid-line is never split.
New files are picked up by rescanning the patterns.

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
from io import FileIO
from pathlib import PurePosixPath
from typing import Any

from onceflow.api.connector import (
    Behind,
    ConfigProblem,
    ConnectorError,
    OffsetRefusedError,
    SourceConnector,
    SourceOffset,
    SourcePartition,
    SourceRecord,
    SourceTask,
    TaskContext,
)
from onceflow.connectors.file_positions import (
    HEAD_BYTES,
    TAIL_BYTES,
    FileObservation,
    FilePosition,
    Fingerprint,
    content_change,
    fingerprint,
    stored_offset,
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
    """A file was truncated, replaced or rewritten after records of it were taken, or
    cannot be read as configured."""


def owner_task(path: str, task_count: int) -> int:
    """The task that reads ``path`` (stable across processes)."""
    return zlib.crc32(path.encode()) % task_count


def _head(path: str, count: int) -> Fingerprint:
    """The fingerprint of the first ``count`` bytes of the file at ``path``."""
    with open(path, "rb") as file:
        return fingerprint(file.read(count))


@dataclass
class TrackedFile:
    path: str
    at: FilePosition
    handle: FileIO | None = None
    verified: tuple[int, int] | None = None
    """(size, mtime in ns) at its last content check: a file that did not grow past the
    position is checked again only once these change (a rewrite to the same size
    within one tick of the file system's clock shows once the file grows)."""

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
        self.sizes: dict[str, int] = {}
        """Each file's size at its last stat: what ``behind`` counts from."""
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
        """The file at its stored position; the position is checked like every other,
        at the first poll that reaches the file."""
        try:
            inode = os.stat(path).st_ino
        except OSError as error:
            raise FileChangedError(f"config.paths: {path}: {error}") from error
        for other in self.files.values():
            if other.at.inode == inode and self._same_file(other, path):
                raise FileChangedError(
                    f"config.paths: {path} is {other.path} under another name (renamed or "
                    "linked); matched files must keep their names, or records would repeat"
                )
        stored = self.context.offsets.offset({"file": path})
        if stored is None:
            return TrackedFile(path, FilePosition(0, inode))
        if "inode" not in stored:
            # Set by a user while the source was stopped (``offsets alter``): the file
            # now at the path is the one meant, and the first poll checks that a record
            # ends there (a line's newline) like at every other resume.
            return TrackedFile(path, FilePosition(int(stored["position"]), inode))
        return TrackedFile(path, FilePosition.from_storage(stored))

    @staticmethod
    def _same_file(known: TrackedFile, path: str) -> bool:
        """A link to ``known``, or ``known`` renamed (its old name gone, its first bytes
        the same: a new file that only reused the inode starts differently)."""
        try:
            return os.path.samefile(known.path, path)
        except FileNotFoundError:
            head = known.at.head
            return head is not None and _head(path, head[1]) == head

    def _changed(self, tracked: TrackedFile, what: str) -> FileChangedError:
        return FileChangedError(
            f"config.paths: {tracked.path} {what} after {tracked.at.position} bytes of it "
            "were taken, so reading on would skip or split records; files must be "
            "append-only: give new content a new file name (renamed to a new name the "
            "patterns match, this file is read from its start)"
        )

    def _refuse_change(self, tracked: TrackedFile, found: FileObservation) -> None:
        if what := content_change(tracked.at, found, lines=not self.fixed):
            raise self._changed(tracked, what)

    def _stat(self, tracked: TrackedFile) -> os.stat_result | None:
        """The file's status, or None once it is gone (deleted after reading is normal
        clean-up); refuses another inode or a size below the position."""
        try:
            found = os.stat(tracked.path)
        except FileNotFoundError:
            return None
        self._refuse_change(tracked, FileObservation(found.st_ino, found.st_size))
        return found

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
            found = self._stat(tracked)
            if found is not None:
                self.sizes[tracked.path] = found.st_size
            if found is None:
                records += self._drain_deleted(tracked, self.batch_size - len(records))
            elif found.st_size > tracked.at.position:
                records += self._read(tracked, self.batch_size - len(records))
            elif tracked.at.position and (found.st_size, found.st_mtime_ns) != tracked.verified:
                self._verify_unread(tracked)
        return records

    def _drain_deleted(self, tracked: TrackedFile, limit: int) -> list[SourceRecord]:
        """What a deleted file still holds is read through the handle left open; then
        the file is dropped."""
        records = self._read(tracked, limit) if tracked.handle else []
        if not records:
            tracked.close()
            del self.files[tracked.path]
            self.sizes.pop(tracked.path, None)
        return records

    def behind(self) -> Behind:
        """Bytes of the task's files not read yet, by the sizes last seen."""
        return Behind(
            bytes=sum(
                max(0, self.sizes.get(path, tracked.at.position) - tracked.at.position)
                for path, tracked in self.files.items()
            )
        )

    def _open(self, tracked: TrackedFile) -> FileIO | None:
        """A handle on the file, or None once it is gone. Unbuffered: every read is a
        ``pread`` at a byte the task chose, never from a buffer of earlier content."""
        try:
            return open(tracked.path, "rb", buffering=0)
        except FileNotFoundError:
            return None  # deleted since its stat: the next poll drops it
        except OSError as error:
            raise FileChangedError(f"config.paths: {tracked.path}: {error}") from error

    def _verify(self, tracked: TrackedFile, handle: FileIO) -> None:
        """Refuses the file unless it still holds the content its position was counted
        in (``content_change``). Then takes its head again while nothing was taken or
        while more of the first ``HEAD_BYTES`` are there, and the tail an offset stored
        by an earlier release lacks: what passed the checks is the content from here on."""
        fd = handle.fileno()
        found = os.fstat(fd)
        at = tracked.at
        first = os.pread(fd, HEAD_BYTES, 0)
        count = at.bytes_before(lines=not self.fixed)
        before = os.pread(fd, count, at.position - count) if count else None
        self._refuse_change(tracked, FileObservation(found.st_ino, found.st_size, first, before))
        if at.head is None or not at.position or at.head[1] < len(first):
            at = at.with_head(fingerprint(first))
        if at.position and at.tail is None:
            count = min(at.position, TAIL_BYTES)
            at = at.with_tail(fingerprint(os.pread(fd, count, at.position - count)))
        tracked.at = at
        tracked.verified = (found.st_size, found.st_mtime_ns)

    def _verify_unread(self, tracked: TrackedFile) -> None:
        """A file that changed without growing past the position (rewritten to as many
        bytes, or re-created as large) is checked too: no read would notice."""
        handle = tracked.handle or self._open(tracked)
        if handle is None:
            return
        try:
            self._verify(tracked, handle)
        finally:
            if handle is not tracked.handle:
                handle.close()

    def _read(self, tracked: TrackedFile, limit: int) -> list[SourceRecord]:
        """Up to ``limit`` complete records from the position, once the file is found
        to hold the content the position was counted in; a record still being written
        stays for a later poll. The handle is closed at the end of what is there, so
        idle files hold no descriptor (a deleted file's handle, left open to drain it,
        too)."""
        if tracked.handle is None:
            tracked.handle = self._open(tracked)
            if tracked.handle is None:
                return []
        fd = tracked.handle.fileno()
        self._verify(tracked, tracked.handle)
        at = tracked.at
        position, tail = at.position, at.tail
        partition = {"file": tracked.path}
        key = tracked.path.encode() if self.keyed else None
        # ``data`` holds the file from byte ``base``: from ``start`` on what is left to
        # take, and before it up to TAIL_BYTES of what was taken, for each record's tail.
        start = min(position, TAIL_BYTES)
        base, data = position - start, b""
        records: list[SourceRecord] = []
        while len(records) < limit:
            end = self._record_end(tracked.path, data, start, position)
            if end is None:
                more = os.pread(fd, READ_CHUNK, base + len(data))
                if not more:
                    tracked.close()
                    break
                drop = max(0, start - TAIL_BYTES)
                data, base, start = data[drop:] + more, base + drop, start - drop
                continue
            position += end - start
            since = max(0, end - TAIL_BYTES)
            tail = zlib.crc32(data[since:end]), end - since
            records.append(
                SourceRecord(
                    source_partition=partition,
                    source_offset=stored_offset(position, at.inode, at.head, tail),
                    key=key,
                    value=data[start:end] if self.fixed else data[start : end - 1],
                )
            )
            start = end
        if records:
            assert tail is not None
            tracked.at = at.advanced_to(position, tail)
        return records

    def _record_end(self, path: str, data: bytes, start: int, position: int) -> int | None:
        """End (exclusive) of the next complete record in ``data`` from ``start`` (at
        byte ``position`` of the file)."""
        if self.fixed:
            return start + self.fixed if len(data) - start >= self.fixed else None
        newline = data.find(b"\n", start)
        if newline >= 0:
            return newline + 1
        if len(data) - start > self.max_line:
            raise FileChangedError(
                f"config.maxLineBytes: {path} has a line longer than "
                f"{self.max_line} bytes at byte {position}; raise maxLineBytes"
            )
        return None

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

    def alter_offset(
        self, config: Mapping[str, Any], partition: SourcePartition, offset: SourceOffset
    ) -> SourceOffset:
        """``{position: n}``: the next byte of the file to read, where a record begins
        (the task refuses to start elsewhere, naming the file). Stored without the
        file's identity (what ``offsets list`` shows of it belongs to the old position,
        and only a task can read it anew): the file at the path when the task resumes
        is the one meant."""
        path = partition.get("file")
        if set(partition) != {"file"} or not (isinstance(path, str) and os.path.isabs(path)):
            raise OffsetRefusedError(
                f"partition {dict(partition)}: a partition is {{file: /absolute/path}}"
            )
        patterns = config.get("paths") or []
        if not any(PurePosixPath(path).match(str(pattern)) for pattern in patterns):
            raise OffsetRefusedError(
                f"partition {dict(partition)}: {path} matches none of config.paths "
                f"({', '.join(map(str, patterns))}), so no task would ever read the offset"
            )
        position = offset.get("position")
        record_bytes = {**DEFAULTS, **config}["recordBytes"]
        if not is_int(position, 0) or (record_bytes and position % record_bytes):
            whole = f", a multiple of recordBytes ({record_bytes})" if record_bytes else ""
            raise OffsetRefusedError(
                f"offset {dict(offset)}: an offset is {{position: n}}, the byte where the "
                f"next record begins (n >= 0{whole}; 0 reads the file from its start)"
            )
        return {"position": int(offset["position"])}
