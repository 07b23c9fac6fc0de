"""The test bed's image cache: one OCI layout directory (uncompressed layers) that every
build of the image adds a tag to, instead of a 2.3 GB archive per build.

A build changes only the image's last layers, so keeping the others once saves the
disk and, more, the time: writing a whole archive and importing it into the node's
containerd took about 60 s per build, and containerd needs only the layers it lacks.

    oci_layout.py has DIR TAG        exits 0 when the directory holds TAG
    oci_layout.py keep DIR N         forget all but the newest N tags, and their blobs
    oci_layout.py stream DIR TAG NAME < present-digests > image.tar
        an OCI archive of TAG, named NAME for containerd, without the blobs listed on
        stdin (those containerd already has)
"""

from __future__ import annotations

import io
import json
import sys
import tarfile
from pathlib import Path
from typing import Any

REF_NAME = "org.opencontainers.image.ref.name"
CONTAINERD_NAME = "io.containerd.image.name"

Json = dict[str, Any]


def _index(layout: Path) -> Json:
    index = layout / "index.json"
    loaded: Json = json.loads(index.read_text()) if index.exists() else {"manifests": []}
    return loaded


def _tagged(layout: Path, tag: str) -> Json | None:
    for entry in _index(layout)["manifests"]:
        if entry.get("annotations", {}).get(REF_NAME) == tag:
            found: Json = entry
            return found
    return None


def _blob(layout: Path, digest: str) -> Path:
    algorithm, hexdigest = digest.split(":", 1)
    return layout / "blobs" / algorithm / hexdigest


def _referenced(layout: Path, manifest: Json) -> set[str]:
    """The digests an index entry needs: its manifest, the manifest's config and layers."""
    body = json.loads(_blob(layout, manifest["digest"]).read_text())
    return {
        manifest["digest"],
        body["config"]["digest"],
        *(layer["digest"] for layer in body["layers"]),
    }


def keep(layout: Path, newest: int) -> None:
    """skopeo appends a new tag's entry at the end of the index (and replaces a tag it
    writes again in place), so the newest are the last."""
    if not (layout / "index.json").exists():
        return
    index = _index(layout)
    kept = index["manifests"][-newest:]
    needed = set().union(*(_referenced(layout, m) for m in kept)) if kept else set()
    index["manifests"] = kept
    (layout / "index.json").write_text(json.dumps(index, separators=(",", ":")))
    for blob in (layout / "blobs").glob("*/*"):
        if f"{blob.parent.name}:{blob.name}" not in needed:
            blob.unlink()


def stream(layout: Path, tag: str, name: str, present: set[str]) -> None:
    tagged = _tagged(layout, tag)
    if tagged is None:
        raise SystemExit(f"oci_layout.py: no tag {tag} in {layout}")
    entry = {**tagged, "annotations": {REF_NAME: tag, CONTAINERD_NAME: name}}
    with tarfile.open(fileobj=sys.stdout.buffer, mode="w|") as archive:
        for arcname, data in (
            ("oci-layout", (layout / "oci-layout").read_bytes()),
            ("index.json", json.dumps({"schemaVersion": 2, "manifests": [entry]}).encode()),
        ):
            info = tarfile.TarInfo(arcname)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        for digest in sorted(_referenced(layout, entry)):
            # The manifest always: containerd reads it to name and unpack the image.
            if digest in present and digest != entry["digest"]:
                continue
            path = _blob(layout, digest)
            archive.add(path, arcname=str(path.relative_to(layout)))


def main(argv: list[str]) -> None:
    match argv:
        case ["has", layout, tag]:
            raise SystemExit(0 if _tagged(Path(layout), tag) else 1)
        case ["keep", layout, newest]:
            keep(Path(layout), int(newest))
        case ["stream", layout, tag, name]:
            stream(Path(layout), tag, name, set(sys.stdin.read().split()))
        case _:
            raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
