"""The ``files`` connector's reading rules on real files: whole lines only, resuming at
the stored byte position, and truncated, replaced or rewritten files refused by name,
by a running task between two polls as by a restarted one. (The kill-and-audit proof
against a real broker is the source conformance kit's, tests/conformance; the content
checks as a table are tests/unit/test_file_positions.py.)"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from onceflow.api.connector import SourceOffset, SourcePartition, SourceRecord, TaskContext
from onceflow.connectors.file_positions import HEAD_BYTES, TAIL_BYTES, FilePosition, fingerprint
from onceflow.connectors.files import READ_CHUNK, FileChangedError, FilesConnector, FilesTask


class StoredOffsets:
    """What the runtime's offset reader answers: the offsets committed so far."""

    def __init__(self, stored: Mapping[str, SourceOffset] | None = None) -> None:
        self.stored = dict(stored or {})

    def offset(self, partition: SourcePartition) -> SourceOffset | None:
        return self.stored.get(partition["file"])


def _task(
    pattern: str,
    offsets: StoredOffsets | None = None,
    task_id: int = 0,
    tasks: int = 1,
    **config: Any,
) -> FilesTask:
    merged = {"paths": [pattern], **config}
    assert FilesConnector().validate(merged) == []
    planned = FilesConnector().task_configs(merged, tasks)[task_id]
    task = FilesTask()
    task.start(TaskContext(task_id=task_id, config=planned, offsets=offsets or StoredOffsets()))
    return task


def _values(task: FilesTask) -> list[bytes | None]:
    return [r.value for r in task.poll()]


def test_whole_lines_only_and_each_offset_is_the_position_after_its_record(
    tmp_path: Path,
) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"one\ntwo\nthr")
    task = _task(str(tmp_path / "*.log"))
    records = task.poll()
    assert [r.value for r in records] == [b"one", b"two"]
    assert [r.source_offset["position"] for r in records] == [4, 8]
    assert records[0].key == str(log).encode()
    with log.open("ab") as out:
        out.write(b"ee\n")
    assert _values(task) == [b"three"]
    assert _values(task) == []


def test_a_restarted_task_resumes_at_the_stored_position(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"one\ntwo\nthree\n")
    stored = {str(log): {"position": 8, "inode": os.stat(log).st_ino}}
    assert _values(_task(str(tmp_path / "*.log"), StoredOffsets(stored))) == [b"three"]


def test_fixed_size_records_and_a_batch_limit(tmp_path: Path) -> None:
    (tmp_path / "r.bin").write_bytes(b"AAAABBBBCCCCDD")
    task = _task(str(tmp_path / "*.bin"), format="fixed", recordBytes=4, batchSize=2)
    assert _values(task) == [b"AAAA", b"BBBB"]
    assert _values(task) == [b"CCCC"]


def test_a_new_file_is_picked_up_at_the_next_scan(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_bytes(b"a\n")
    task = _task(str(tmp_path / "*.log"), scanIntervalMs=100)
    assert _values(task) == [b"a"]
    (tmp_path / "b.log").write_bytes(b"b\n")
    task.scanned_at = float("-inf")  # the scan interval has passed
    assert _values(task) == [b"b"]


def test_a_truncated_file_stops_the_task_naming_it(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"one\ntwo\n")
    stored = {str(log): {"position": 8, "inode": os.stat(log).st_ino}}
    log.write_bytes(b"x\n")  # same inode, shorter
    with pytest.raises(FileChangedError, match=f"{log} was truncated to 2 bytes"):
        _task(str(tmp_path / "*.log"), StoredOffsets(stored)).poll()


def test_a_replaced_file_stops_the_task_naming_it(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"one\n")
    task = _task(str(tmp_path / "*.log"))
    assert _values(task) == [b"one"]
    (tmp_path / "new").write_bytes(b"one\ntwo\n")
    (tmp_path / "new").rename(log)  # rotation that reuses the name
    with pytest.raises(FileChangedError, match=f"{log} was replaced"):
        task.poll()


def test_a_line_longer_than_the_limit_is_refused_naming_the_setting(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_bytes(b"x" * 300_000)
    with pytest.raises(FileChangedError, match=r"config\.maxLineBytes"):
        _task(str(tmp_path / "*.log"), maxLineBytes=200_000).poll()


def test_a_line_longer_than_one_read_is_taken_whole(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_bytes(b"y" * 600_000 + b"\nz\n")
    assert _values(_task(str(tmp_path / "*.log"))) == [b"y" * 600_000, b"z"]


def test_every_file_is_read_by_exactly_one_task(tmp_path: Path) -> None:
    for n in range(12):
        (tmp_path / f"{n}.log").write_bytes(f"{n}\n".encode())
    seen: list[bytes | None] = []
    for task_id in range(3):
        seen += _values(_task(str(tmp_path / "*.log"), task_id=task_id, tasks=3))
    assert sorted(seen, key=lambda v: int(v or b"0")) == [f"{n}".encode() for n in range(12)]


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"paths": ["relative/*.log"]}, "paths"),
        ({"paths": []}, "paths"),
        ({"format": "csv"}, "format"),
        ({"format": "fixed"}, "recordBytes"),
        ({"recordBytes": 4}, "recordBytes"),
        ({"key": "line"}, "key"),
        ({"scanIntervalMs": 1}, "scanIntervalMs"),
        ({"follow": True}, "follow"),
    ],
)
def test_a_config_the_connector_cannot_run_is_refused_naming_the_setting(
    config: dict[str, Any], field: str
) -> None:
    problems = FilesConnector().validate({"paths": ["/data/*.log"], **config})
    assert [p.field for p in problems] == [field]


def _stored(records: list[SourceRecord]) -> StoredOffsets:
    """The offsets the runtime would have committed with ``records``."""
    return StoredOffsets({r.source_partition["file"]: r.source_offset for r in records})


def test_a_successor_under_a_reused_inode_is_refused_at_resume(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"old1\nold2\n")
    offsets = _stored(_task(str(tmp_path / "*.log")).poll())
    log.unlink()
    log.write_bytes(b"NEW1\nNEW2\nNEW3\n")  # often the same inode again (ext4)
    with pytest.raises(FileChangedError, match=f"{log} was replaced"):
        _task(str(tmp_path / "*.log"), offsets).poll()


def test_a_renamed_file_is_refused_rather_than_read_again(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_bytes(b"l1\nl2\n")
    task = _task(str(tmp_path / "app.log*"))
    assert _values(task) == [b"l1", b"l2"]
    log.rename(tmp_path / "app.log.1")
    task.scanned_at = float("-inf")
    with pytest.raises(FileChangedError, match=r"app\.log\.1 is .*app\.log under another name"):
        task.poll()


def test_what_a_deleted_file_still_held_is_read_before_it_is_dropped(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"one\n")
    task = _task(str(tmp_path / "*.log"), batchSize=1)
    with log.open("ab") as out:
        out.write(b"two\nthree\n")
    assert _values(task) == [b"one"]  # the handle stays open: more is there
    log.unlink()
    assert _values(task) + _values(task) == [b"two", b"three"]
    assert _values(task) == [] and task.files == {}


def test_a_missing_directory_is_named_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(
        FileChangedError, match=r"config\.paths: directory .*missing of .* does not exist"
    ):
        _task(str(tmp_path / "missing" / "*.log")).poll()


def test_a_file_with_a_backlog_does_not_starve_the_others(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_bytes(b"a\n" * 100)
    (tmp_path / "b.log").write_bytes(b"b\n")
    task = _task(str(tmp_path / "*.log"), batchSize=10)
    seen = [v for _ in range(3) for v in _values(task)]
    assert b"b" in seen


# -- content changed between two polls (issue 26 hole 5) ----------------------------

SHARED_START = b"h" * (HEAD_BYTES + 100) + b"\n"
"""A first line longer than the head, the same in old and new content (a header)."""
REWRITTEN = r"was replaced \(under the same inode\) or rewritten in place"


def _replace_content(log: Path, content: bytes, how: str) -> bool:
    """Gives ``log`` new content as a writer that breaks the append-only rule does;
    whether it kept its inode (always in place; re-created, at once on ext4)."""
    inode = os.stat(log).st_ino
    if how == "deleted-and-recreated":
        log.unlink()
    log.write_bytes(content)  # in place: truncated (`>`, copytruncate), then written
    return os.stat(log).st_ino == inode


@pytest.mark.parametrize("restarted", [False, True], ids=["running", "restarted"])
@pytest.mark.parametrize("how", ["rewritten-in-place", "deleted-and-recreated"])
@pytest.mark.parametrize(
    ("start", "differs"),
    [
        (b"", r"its first 12 bytes differ"),
        (SHARED_START, rf"the {TAIL_BYTES} bytes before byte {len(SHARED_START) + 12} differ"),
    ],
    ids=["all-new", "same-first-bytes"],
)
def test_a_file_changed_and_grown_past_the_position_between_polls_stops_the_task(
    tmp_path: Path, restarted: bool, how: str, start: bytes, differs: str
) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(start + b"old-1\nold-2\n")
    task = _task(str(tmp_path / "*.log"))
    records = task.poll()
    assert [r.value for r in records][-2:] == [b"old-1", b"old-2"]
    reused = _replace_content(log, start + b"new-1\nnew-2\nnew-3\nnew-4\n", how)
    if restarted:
        task = _task(str(tmp_path / "*.log"), _stored(records))
    what = rf"{REWRITTEN} \({differs}\)" if reused else r"was replaced \(inode \d+ -> \d+\)"
    with pytest.raises(
        FileChangedError,
        match=rf"config\.paths: {log} {what} after {len(start) + 12} bytes of it were taken.*"
        "give new content a new file name",
    ):
        task.poll()


@pytest.mark.parametrize("fixed", [False, True], ids=["lines", "fixed"])
def test_a_file_rewritten_to_the_same_size_stops_the_task_before_it_grows(
    tmp_path: Path, fixed: bool
) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"old-1\nold-2\n")
    config: dict[str, Any] = {"format": "fixed", "recordBytes": 6} if fixed else {}
    task = _task(str(tmp_path / "*.log"), **config)
    assert len(task.poll()) == 2
    log.write_bytes(b"new-1\nnew-2\n")  # nothing past the position: no read would notice
    # Its time moves, as it does unless the write falls in the same tick of the file
    # system's clock as the one before (then only growth shows the change).
    found = os.stat(log)
    os.utime(log, ns=(found.st_atime_ns, found.st_mtime_ns + 10**9))
    with pytest.raises(FileChangedError, match=rf"{log} {REWRITTEN} \(its first 12 bytes"):
        task.poll()


def test_every_records_offset_resumes_right_after_it(tmp_path: Path) -> None:
    """Each record's offset stands alone (the runtime stores whichever record ends a
    transaction), and its tail is right across reads: records cross read chunks, some
    lines are longer than the tail, and the file grows from a few bytes past its head."""
    log = tmp_path / "a.log"
    lines = [b"%d:" % n + b"%d," % n * (n * 37 % 150) for n in range(2000)]
    content = b"".join(line + b"\n" for line in lines)
    assert len(content) > 2 * READ_CHUNK
    log.write_bytes(content[:10])
    task = _task(str(tmp_path / "*.log"), batchSize=70)
    records = task.poll()
    for cut in (100, 5000, READ_CHUNK + 3, len(content)):
        with log.open("ab") as out:
            out.write(content[log.stat().st_size : cut])
        while batch := task.poll():
            records += batch
    assert [r.value for r in records] == lines
    last = FilePosition.from_storage(records[-1].source_offset)
    assert last.head == fingerprint(content[:HEAD_BYTES])  # grown with the file
    assert last.tail == fingerprint(content[-TAIL_BYTES:])
    for n in range(0, len(lines) - 1, 13):
        stored = StoredOffsets({str(log): records[n].source_offset})
        resumed = _task(str(tmp_path / "*.log"), stored, batchSize=1)
        assert _values(resumed) == [lines[n + 1]], n


@pytest.mark.parametrize(
    "kept",
    [("position", "inode"), ("position", "inode", "head", "headBytes")],
    ids=["first-release", "with-head"],
)
def test_offsets_stored_by_earlier_releases_resume_and_gain_a_tail(
    tmp_path: Path, kept: tuple[str, ...]
) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"one\ntwo\n")
    offset = _task(str(tmp_path / "*.log")).poll()[-1].source_offset
    stored = StoredOffsets({str(log): {k: v for k, v in offset.items() if k in kept}})
    with log.open("ab") as out:
        out.write(b"three\n")
    records = _task(str(tmp_path / "*.log"), stored).poll()
    assert [r.value for r in records] == [b"three"]
    content = log.read_bytes()
    assert FilePosition.from_storage(records[0].source_offset) == FilePosition(
        len(content), os.stat(log).st_ino, fingerprint(content), fingerprint(content)
    )


def test_a_first_release_offset_whose_line_end_moved_is_refused(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"one\ntwo\n")
    stored = {str(log): {"position": 8, "inode": os.stat(log).st_ino}}
    log.write_bytes(b"a longer first line\n")  # same inode, longer, no newline at 8
    with pytest.raises(FileChangedError, match=rf"{log} {REWRITTEN} \(no line ends at byte 8\)"):
        _task(str(tmp_path / "*.log"), StoredOffsets(stored)).poll()


def test_a_file_rewritten_before_any_line_was_taken_is_read_from_its_start(
    tmp_path: Path,
) -> None:
    """Nothing was taken, so nothing can be skipped: the head is taken again, and a
    restart does not hold the first content against the second."""
    log = tmp_path / "a.log"
    log.write_bytes(b"par")  # a line still being written
    task = _task(str(tmp_path / "*.log"))
    assert _values(task) == []
    log.write_bytes(b"whole\n")
    records = task.poll()
    assert [r.value for r in records] == [b"whole"]
    with log.open("ab") as out:
        out.write(b"next\n")
    assert _values(_task(str(tmp_path / "*.log"), _stored(records))) == [b"next"]


def test_what_is_left_to_read_is_measured_by_the_sizes_last_seen(tmp_path: Path) -> None:
    (tmp_path / "r.bin").write_bytes(b"AAAABBBBCCCCDD")
    task = _task(str(tmp_path / "*.bin"), format="fixed", recordBytes=4, batchSize=2)
    assert task.behind().bytes == 0, "nothing seen yet"
    assert _values(task) == [b"AAAA", b"BBBB"]
    assert task.behind().bytes == 6, "CCCC and the partial DD"
    assert _values(task) == [b"CCCC"]
    assert task.behind().bytes == 2
