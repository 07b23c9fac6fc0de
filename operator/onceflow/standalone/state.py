"""Durable per-source state of ``onceflow run``: the generation record.

Written atomically (temp file, fsync, rename) because it is both the supervisor's
memory across restarts and the generation authority its task processes consult.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from onceflow.logic.generations import GenerationRecord, LegacyIds


def state_path(state_dir: Path, namespace: str, source: str) -> Path:
    return state_dir / f"{namespace}.{source}.json"


def workload_file(state_dir: Path, namespace: str, name: str, what: str) -> Path:
    """``<namespace>.<name>.<what>``: one flat directory, names that sort by workload."""
    return state_dir / f"{namespace}.{name}.{what}"


def load_record(
    path: Path, legacy_ids: LegacyIds, legacy_offsets_topic: str
) -> GenerationRecord | None:
    if not path.exists():
        return None
    return GenerationRecord.from_json(
        json.loads(path.read_text()), legacy_ids, legacy_offsets_topic
    )


def write_json_atomically(path: Path, payload: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(path.suffix + ".tmp")
    with temporary.open("w") as handle:
        json.dump(payload, handle, indent=2, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())
    temporary.replace(path)


def store_record(path: Path, record: GenerationRecord) -> None:
    write_json_atomically(path, record.to_json())
