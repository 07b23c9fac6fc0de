"""What a ``files`` position says about the content it was counted in: every stored form
still read, and a file that may hold other content than the position was counted in
told apart from one that only grew (``content_change``), as a table."""

from __future__ import annotations

import pytest

from onceflow.connectors.file_positions import (
    TAIL_BYTES,
    FileObservation,
    FilePosition,
    content_change,
    fingerprint,
)

OLD = b"abc\ndefgh\n"
"""What was taken: two lines, 10 bytes."""
AT = FilePosition(10, inode=7, head=fingerprint(OLD), tail=fingerprint(OLD))
FIRST_RELEASE = FilePosition(10, inode=7)
WITH_HEAD = FilePosition(10, inode=7, head=fingerprint(OLD))


def _read(content: bytes, at: FilePosition, lines: bool = True) -> FileObservation:
    """What the task reads of ``content`` before going on from ``at``."""
    count = at.bytes_before(lines)
    return FileObservation(
        7, len(content), content[:4096], content[at.position - count : at.position]
    )


REWRITTEN = "was replaced (under the same inode) or rewritten in place"


@pytest.mark.parametrize(
    ("at", "found", "lines", "change"),
    [
        # A stat alone: the inode and the size.
        (AT, FileObservation(7, 10), True, None),
        (AT, FileObservation(7, 99), True, None),
        (AT, FileObservation(8, 99), True, "was replaced (inode 7 -> 8)"),
        (AT, FileObservation(7, 9), True, "was truncated to 9 bytes (or replaced by a file"),
        # Grown: the same bytes before the position, whatever follows.
        (AT, _read(OLD + b"more\n", AT), True, None),
        (AT, _read(OLD + b"partial", AT), True, None),
        # Rewritten (or re-created under the same inode) and grown past the position.
        (AT, _read(b"xyz\ndefgh\nmore\n", AT), True, f"{REWRITTEN} (its first 10 bytes differ)"),
        (
            FilePosition(10, 7, head=fingerprint(b"abc\n"), tail=fingerprint(OLD)),
            _read(b"abc\ndefgX\nmore\n", AT),
            True,
            f"{REWRITTEN} (the 10 bytes before byte 10 differ)",
        ),
        (
            AT,
            FileObservation(7, 12, OLD, OLD[:9]),  # shortened between the stat and the read
            True,
            f"{REWRITTEN} (the 10 bytes before byte 10 differ)",
        ),
        # Nothing taken: whatever the file holds is read from its start.
        (FilePosition(0, 7, head=fingerprint(b"par")), _read(b"whole\n", AT), True, None),
        # Stored by earlier releases: the head if kept, then (lines) a newline at the end.
        (WITH_HEAD, _read(OLD + b"more\n", WITH_HEAD), True, None),
        (WITH_HEAD, _read(b"xyz\n" + OLD, WITH_HEAD), True, f"{REWRITTEN} (its first 10"),
        (FIRST_RELEASE, _read(b"012345678\nmore\n", FIRST_RELEASE), True, None),
        (
            FIRST_RELEASE,
            _read(b"a longer line\n", FIRST_RELEASE),
            True,
            f"{REWRITTEN} (no line ends at byte 10)",
        ),
        # Fixed-size records have no line end to check.
        (FIRST_RELEASE, _read(b"a longer line\n", FIRST_RELEASE, False), False, None),
    ],
)
def test_a_change_before_the_position_is_named_and_growth_is_not(
    at: FilePosition, found: FileObservation, lines: bool, change: str | None
) -> None:
    found_change = content_change(at, found, lines=lines)
    if change is None:
        assert found_change is None
    else:
        assert found_change is not None and found_change.startswith(change), found_change


@pytest.mark.parametrize(
    ("at", "lines", "count"),
    [
        (FilePosition(0, 7), True, 0),  # nothing taken, nothing to compare
        (AT, True, 10),  # the stored tail's length
        (AT, False, 10),
        (FilePosition(900, 7, tail=(0, TAIL_BYTES)), True, TAIL_BYTES),
        (FIRST_RELEASE, True, 1),  # no tail stored: the newline that ends the last line
        (WITH_HEAD, True, 1),
        (FIRST_RELEASE, False, 0),  # fixed-size records: nothing but the head
    ],
)
def test_the_bytes_read_before_the_position_are_the_stored_tails(
    at: FilePosition, lines: bool, count: int
) -> None:
    assert at.bytes_before(lines) == count


@pytest.mark.parametrize(
    "stored",
    [
        {"position": 10, "inode": 7},
        {"position": 10, "inode": 7, "head": 11, "headBytes": 10},
        {"position": 10, "inode": 7, "head": 11, "headBytes": 10, "tail": 12, "tailBytes": 10},
    ],
    ids=["first-release", "with-head", "with-tail"],
)
def test_every_stored_form_is_read_and_written_back_as_it_was(stored: dict[str, int]) -> None:
    position = FilePosition.from_storage(stored)
    assert position.position == 10 and position.inode == 7
    assert position.for_storage() == stored
