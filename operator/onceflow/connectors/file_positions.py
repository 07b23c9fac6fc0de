"""Where a ``files`` task is in a file, and whether the file there still holds the
content that position was taken in.

Invariant: a position is resumed only in the bytes it was counted in. The inode alone
does not say so (a deleted file's inode is handed to the next file created, at once on
ext4), nor does the size (a file truncated and written again can grow past the old
position between two polls). What does: bytes before the position. An append-only
file never changes them, while new content almost always differs in its first bytes
(the *head*) or in the bytes just before the position (the *tail*: the end of the last
record taken, and the start of what follows must line up with it). Both are kept as a
CRC-32 and a length, stored with every offset, so a restarted task checks the same.

What is not caught: new content that equals the old in its first ``HEAD_BYTES`` and in
the ``TAIL_BYTES`` before the position, yet differs between them. Reading the whole
prefix again on every poll would close that, at a cost growing with the file.

Pure: the caller reads the bytes (``bytes_before``, ``FilePosition.head``) and passes
what it found.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

HEAD_BYTES = 4096
"""How much of a file's start identifies it: one page, a single read."""
TAIL_BYTES = 256
"""How much before the position is compared: a log or JSON line or two, timestamps
and ids included. Its CRC is taken for every record, as each offset must stand on
its own: about 0.5 µs per short line (1.7 -> 2.2 µs of the task's own time); 32
bytes would save 0.2 µs of that and often see only the end of one line."""


Fingerprint = tuple[int, int]
"""The CRC-32 of some bytes, and how many. A plain tuple: one is made per record taken."""


def fingerprint(data: bytes) -> Fingerprint:
    return zlib.crc32(data), len(data)


@dataclass(frozen=True, slots=True)
class FilePosition:
    """The byte position after the last record taken from a file, with what identifies
    the content it was counted in."""

    position: int
    inode: int
    head: Fingerprint | None = None
    """Of the file's first bytes, once it has any (offsets of the first release have
    none)."""
    tail: Fingerprint | None = None
    """Of the bytes before ``position`` (up to ``TAIL_BYTES``), once past 0 (offsets
    stored before tails were kept have none: then, for lines, a newline must end there)."""

    @classmethod
    def from_storage(cls, stored: Mapping[str, Any]) -> FilePosition:
        """Reads every stored form: ``position`` and ``inode``; then with ``head`` and
        ``headBytes``; now also with ``tail`` and ``tailBytes``."""

        def stored_fingerprint(name: str) -> Fingerprint | None:
            if name not in stored:
                return None
            return int(stored[name]), int(stored[f"{name}Bytes"])

        return cls(
            int(stored["position"]),
            int(stored["inode"]),
            stored_fingerprint("head"),
            stored_fingerprint("tail"),
        )

    def for_storage(self) -> dict[str, int]:
        return stored_offset(self.position, self.inode, self.head, self.tail)

    def with_head(self, head: Fingerprint) -> FilePosition:
        return replace(self, head=head)

    def with_tail(self, tail: Fingerprint) -> FilePosition:
        return replace(self, tail=tail)

    def advanced_to(self, position: int, tail: Fingerprint) -> FilePosition:
        return replace(self, position=position, tail=tail)

    def bytes_before(self, lines: bool) -> int:
        """How many bytes before the position to read for ``content_change``."""
        if not self.position:
            return 0
        if self.tail is not None:
            return self.tail[1]
        return 1 if lines else 0


def stored_offset(
    position: int, inode: int, head: Fingerprint | None, tail: Fingerprint | None
) -> dict[str, int]:
    """The stored form (``FilePosition.from_storage`` reads it). A function of plain
    values because it runs once per record taken."""
    offset = {"position": position, "inode": inode}
    if head is not None:
        offset["head"], offset["headBytes"] = head
    if tail is not None:
        offset["tail"], offset["tailBytes"] = tail
    return offset


@dataclass(frozen=True, slots=True)
class FileObservation:
    """What a file holds now; ``head`` and ``before`` are ``None`` when not read (after
    a ``stat`` alone)."""

    inode: int
    size: int
    head: bytes | None = None
    """Its first bytes: at least the stored head's length, if it has as many."""
    before: bytes | None = None
    """The ``FilePosition.bytes_before`` bytes before the position (fewer if it has
    fewer)."""


def content_change(at: FilePosition, found: FileObservation, *, lines: bool) -> str | None:
    """What happened to the file (to complete "<path> ..."), or ``None`` while it may
    still hold the content ``at`` was counted in. ``lines``: the format is lines (a
    record ends with a newline)."""
    if found.inode != at.inode:
        return f"was replaced (inode {at.inode} -> {found.inode})"
    if found.size < at.position:
        return (
            f"was truncated to {found.size} bytes (or replaced by a file that short under "
            "the same inode)"
        )
    if differs := _bytes_changed(at, found, lines=lines):
        # Which of the two cannot be told: a deleted file's inode goes to the next file
        # created (at once on ext4), so both keep the name and the inode.
        return f"was replaced (under the same inode) or rewritten in place ({differs})"
    return None


def _bytes_changed(at: FilePosition, found: FileObservation, *, lines: bool) -> str | None:
    """Which of the bytes read differ from the ones ``at`` was counted in."""
    if not at.position:
        return None  # nothing was taken: the file is read from its start, whatever it holds
    head = at.head
    if found.head is not None and head is not None and fingerprint(found.head[: head[1]]) != head:
        return f"its first {head[1]} bytes differ"
    if found.before is None:
        return None
    if at.tail is not None:
        same = fingerprint(found.before) == at.tail
        return None if same else f"the {at.tail[1]} bytes before byte {at.position} differ"
    if lines and found.before != b"\n":
        return f"no line ends at byte {at.position}"
    return None
