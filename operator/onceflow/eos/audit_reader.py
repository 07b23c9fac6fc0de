"""Reads ``(key, seq)`` pairs from a topic for the audit, ``read_committed``."""

from __future__ import annotations

import json
from collections.abc import Mapping

from onceflow.eos.consume import read_to_end


def read_sequences(
    bootstrap: str,
    topic: str,
    *,
    key_field: str,
    seq_field: str,
    extra: Mapping[str, str] | None = None,
    isolation: str = "read_committed",
    timeout_s: float = 120,
) -> tuple[list[tuple[str, int]], int]:
    """The pairs in log order per partition, and how many values lacked the fields."""
    pairs: list[tuple[str, int]] = []
    unparsable = 0
    for message in read_to_end(
        bootstrap, topic, extra=extra, isolation=isolation, timeout_s=timeout_s
    ):
        try:
            body = json.loads(message.value() or b"null")
            pairs.append((str(body[key_field]), int(body[seq_field])))
        except (TypeError, ValueError, KeyError):
            unparsable += 1
    return pairs, unparsable
