"""Where a SparkJob's checkpoint lives, as a place two jobs can be compared by.

A Structured Streaming checkpoint belongs to one query: two drivers on one checkpoint
(or one inside the other's) overwrite each other's offset log, commit log and state,
and a batch can be written under both jobs' sink identities. The pipeline graph
(``logic.topic_ownership``) refuses two jobs whose places overlap; the SparkJob
reconciler labels driver and executor pods with ``label_value`` so that a job
started on a checkpoint waits until another job's pods on it are gone (a renamed
job whose predecessor's driver is still terminating).

A claim (``spec.checkpoint.pvc``) is a place of its namespace: two namespaces may
each have a claim called ``checkpoint``. A path or URI (``spec.checkpoint.path``) is
one place for every namespace: an object store or a shared file system does not
know namespaces. Paths compare by their components after normalising, so
``s3a://b/ck/`` and ``s3a://b/ck`` are one place, ``/data/ck`` and ``file:///data/ck``
too; the comparison is textual and cannot see two names of one store (a symlink, a
bucket's two endpoints).
"""

from __future__ import annotations

import hashlib
import posixpath
from dataclasses import dataclass
from urllib.parse import urlsplit

from onceflow.api.spark import SparkJob


@dataclass(frozen=True)
class CheckpointPlace:
    """A store (a namespace's claim, a URI's scheme and authority, the local file
    system) and the path components within it."""

    store: str
    parts: tuple[str, ...]

    def overlaps(self, other: CheckpointPlace) -> bool:
        """One store, and one path equal to or inside the other."""
        return self.within(other) or other.within(self)

    def within(self, other: CheckpointPlace) -> bool:
        """One store, and this path equal to or inside ``other``'s."""
        return self.store == other.store and self.parts[: len(other.parts)] == other.parts

    @property
    def local(self) -> bool:
        """A path of the driver's (or executor's) own file system."""
        return self.store in (LOCAL, RELATIVE)

    def __str__(self) -> str:
        return f"{self.store}/{'/'.join(self.parts)}"


LOCAL = "file:"
RELATIVE = "file:."


def place_of(job: SparkJob) -> CheckpointPlace:
    checkpoint = job.spec.checkpoint
    if checkpoint.pvc:
        return CheckpointPlace(f"pvc:{job.metadata.namespace}/{checkpoint.pvc}", ())
    assert checkpoint.path, "a checkpoint has a claim or a path"
    return path_place(checkpoint.path)


def path_place(uri: str) -> CheckpointPlace:
    """Where a path or URI points, as Hadoop's file systems would find it."""
    split = urlsplit(uri)
    scheme = split.scheme.lower()
    if scheme == "":  # a bare path: a relative one is relative to every driver of a run
        store = LOCAL if uri.startswith("/") else RELATIVE
        path = uri
    elif scheme == "file":
        store, path = LOCAL, split.path
    else:
        store, path = f"{scheme}://{split.netloc.lower()}", split.path
    normal = posixpath.normpath("/" + path)
    return CheckpointPlace(store, tuple(part for part in normal.split("/") if part))


def label_value(place: CheckpointPlace) -> str:
    """A label value (at most 63 characters, and no '/') naming the place: pods carry
    it, and a selector on it finds every pod on one checkpoint."""
    return hashlib.sha256(str(place).encode()).hexdigest()[:32]
