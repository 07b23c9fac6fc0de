"""Manifests as ``kubectl apply -f`` takes them: files, directories (their ``.yaml``,
``.yml`` and ``.json`` files, in name order) and ``-`` for standard input, each
document a resource or a ``v1`` ``List`` of them. ``onceflow render`` and ``onceflow
run`` read them here, so that every mistake in a file (missing, a directory with no
manifests, not text, not YAML, a document that is no resource, nothing at all) is one
error naming the file, and a YAML error its line and column: never a traceback.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import yaml

STDIN = "-"
SUFFIXES = (".yaml", ".yml", ".json")


class ManifestFileError(Exception):
    """A file the manifests cannot be read from, said as ``file: what is wrong``."""


@dataclass(frozen=True)
class ManifestSources:
    """What was given on the command line; standard input read once, when given."""

    given: tuple[str, ...]
    stdin_text: str | None = None

    @classmethod
    def of(cls, given: Sequence[str], stdin: TextIO) -> ManifestSources:
        if not given:
            raise ManifestFileError("no manifests given: name files or directories, or - for stdin")
        return cls(tuple(given), stdin.read() if STDIN in given else None)

    def files(self) -> list[Path]:
        """Every file named, and every manifest file of every directory named."""
        found: list[Path] = []
        for source in self.given:
            if source == STDIN:
                continue
            path = Path(source)
            if path.is_dir():
                inside = sorted(p for p in path.iterdir() if p.suffix in SUFFIXES and p.is_file())
                if not inside:
                    raise ManifestFileError(
                        f"{source}: a directory without {', '.join(SUFFIXES)} files"
                    )
                found += inside
            elif path.is_file():
                found.append(path)
            else:
                raise ManifestFileError(f"{source}: no such file or directory")
        return found

    def stamps(self) -> tuple[int, ...]:
        """Changes when a file is edited, added to or removed from a named directory:
        ``onceflow run`` plans again then (standard input never changes)."""
        named = [Path(s) for s in self.given if s != STDIN]
        return tuple(p.stat().st_mtime_ns for p in [*named, *self.files()] if p.exists())

    def documents(self) -> list[dict[str, Any]]:
        """Every resource document, in order (``List`` items in their place)."""
        texts = [(str(path), _text(path)) for path in self.files()]
        if self.stdin_text is not None:
            texts.append(("<stdin>", self.stdin_text))
        documents: list[dict[str, Any]] = []
        for name, text in texts:
            documents += _documents(name, text)
        if not documents:
            raise ManifestFileError(f"{', '.join(self.given)}: no resources in it")
        return documents


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ManifestFileError(f"{path}: not a text file (UTF-8 YAML or JSON)") from None
    except OSError as error:
        raise ManifestFileError(f"{path}: {error.strerror}") from None


def _documents(name: str, text: str) -> list[dict[str, Any]]:
    try:
        loaded = list(yaml.safe_load_all(text))
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"{name}:{mark.line + 1}:{mark.column + 1}" if mark else name
        raise ManifestFileError(f"{where}: not valid YAML: {error.problem or error}") from None
    except yaml.YAMLError as error:
        raise ManifestFileError(f"{name}: not valid YAML: {error}") from None
    documents: list[dict[str, Any]] = []
    for index, document in enumerate(loaded, start=1):
        if document is None:
            continue
        if isinstance(document, dict) and document.get("kind") == "List":
            items = document.get("items")
            if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
                raise ManifestFileError(
                    f"{name}: document {index}: a List whose items are not resources"
                )
            documents += items
        elif isinstance(document, dict):
            documents.append(document)
        else:
            what = type(document).__name__.replace("str", "text").replace("dict", "mapping")
            raise ManifestFileError(
                f"{name}: document {index} is a {what}, not a resource (a mapping with "
                "apiVersion, kind, metadata and spec; several go in documents separated by ---)"
            )
    return documents
