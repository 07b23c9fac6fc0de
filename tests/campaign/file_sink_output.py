"""What Spark's file sink committed, read as Spark's own reader reads it: only the files
its ``_spark_metadata`` log lists. A killed executor or driver leaves part files of
batches it never committed beside them; the log is what makes the sink exactly-once,
so a reader that listed the directory would count those as duplicates.

Read without a Spark session (the campaign's process has none): the log's files hold
a version line and one JSON entry per output file; every tenth batch Spark compacts the
entries so far into ``N.compact``, and may later delete the files before it, so the
union of the entries of all files present is the whole log."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlparse

SINK_LOG = "_spark_metadata"


def committed_files(output: Path) -> list[Path]:
    """The output files the log lists as added and not deleted, in name order."""
    added: set[str] = set()
    deleted: set[str] = set()
    for entry_file in sorted((output / SINK_LOG).glob("[0-9]*")):
        if entry_file.name.endswith(".tmp") or entry_file.name.startswith("."):
            continue
        lines = entry_file.read_text().splitlines()[1:]  # the version line first
        for line in filter(None, lines):
            entry = json.loads(line)
            (deleted if entry.get("action") == "delete" else added).add(entry["path"])
    return sorted(Path(unquote(urlparse(path).path)) for path in added - deleted)


def committed_values(output: Path) -> Iterator[str]:
    """The ``value`` column of every committed JSON-lines row."""
    for path in committed_files(output):
        with path.open() as file:
            for line in file:
                if line.strip():
                    yield str(json.loads(line)["value"])
