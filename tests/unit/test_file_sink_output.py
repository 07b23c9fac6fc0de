"""The file sink's committed output as its metadata log lists it, including a log file
Spark deleted (compacted away) between being listed and being read."""

from __future__ import annotations

import json
from pathlib import Path

from tests.campaign.file_sink_output import committed_files, committed_values


def _log(directory: Path, name: str, *entries: dict[str, str]) -> None:
    lines = ["v1", *(json.dumps(e) for e in entries)]
    (directory / name).write_text("\n".join(lines) + "\n")


def test_only_listed_files_count_and_a_vanished_log_file_is_skipped(tmp_path: Path) -> None:
    log = tmp_path / "_spark_metadata"
    log.mkdir()
    for name, value in (("part-0.json", "a"), ("part-1.json", "b"), ("stray.json", "x")):
        (tmp_path / name).write_text(json.dumps({"value": value}) + "\n")
    _log(log, "0", {"path": f"file://{tmp_path}/part-0.json", "action": "add"})
    _log(log, "1.compact", {"path": f"file://{tmp_path}/part-0.json", "action": "add"},
         {"path": f"file://{tmp_path}/part-1.json", "action": "add"})  # fmt: skip
    # Listed by the glob, gone when read: what compaction's clean-up leaves a reader.
    (log / "2").symlink_to(log / "deleted-by-spark")
    assert committed_files(tmp_path) == [tmp_path / "part-0.json", tmp_path / "part-1.json"]
    assert sorted(committed_values(tmp_path)) == ["a", "b"]
