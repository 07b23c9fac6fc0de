"""The reference connector: N logical streams each counting 1, 2, 3, ...

Every record is ``{"stream": "s<i>", "seq": n}`` keyed by the stream name, so an audit
of the output topic can prove exactly-once per key: each stream must read 1..limit,
once each, in order. Offsets are ``{"seq": last emitted}`` per stream.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from onceflow.api.connector import (
    ConfigProblem,
    OffsetRefusedError,
    SourceConnector,
    SourceOffset,
    SourcePartition,
    SourceRecord,
    SourceTask,
    TaskContext,
)
from onceflow.connectors.settings import integer_problems, is_int, unknown_settings

# Planning lists every stream, and each generation's ConfigMap names them: bounded so
# one source cannot make the operator's planning or a ConfigMap (1 MiB) blow up.
MAX_STREAMS = 10000

DEFAULTS: dict[str, Any] = {
    "streams": 1,
    "limit": None,
    "batchSize": 100,
    "padBytes": 0,
    "pollIntervalMs": 0,
}
"""``pollIntervalMs`` paces the source (at most one batch per interval) so that tests
and demos can watch a pipeline mid-flight instead of after it finished."""


# One encoder: ``json.dumps`` with separators builds a new one per call.
ENCODE_COMPACT = json.JSONEncoder(separators=(",", ":")).encode


def stream_name(index: int) -> str:
    return f"s{index}"


class StreamBodies:
    """One stream's record values, ``{"stream":"s0","seq":n,"pad":"xx"}`` (no pad when
    it is empty), as compact JSON. Only the number changes from record to record: the
    bytes around it are encoded once, by the JSON encoder itself, so each value is the
    very bytes ``json`` makes of the dict, built at a fifteenth of the cost (0.35
    against 5.4 us measured; at 100-byte records the encoder was a fifth of a task's
    time)."""

    def __init__(self, stream: str, pad: str) -> None:
        self.head = ENCODE_COMPACT({"stream": stream})[:-1].encode() + b',"seq":'
        self.tail = (',"pad":' + ENCODE_COMPACT(pad) if pad else "").encode() + b"}"

    def value(self, seq: int) -> bytes:
        return b"%b%d%b" % (self.head, seq, self.tail)


class SequenceTask(SourceTask):
    """Emits the next ``batchSize`` numbers round-robin over its streams."""

    def start(self, context: TaskContext) -> None:
        super().start(context)
        config = {**DEFAULTS, **context.config}
        self.streams: list[str] = list(config["assigned"])
        self.limit: int | None = config["limit"]
        self.batch_size: int = config["batchSize"]
        pad = "x" * int(config["padBytes"])
        self.bodies = {stream: StreamBodies(stream, pad) for stream in self.streams}
        # One partition dict per stream, shared by its records (never changed).
        self.partitions = {stream: {"stream": stream} for stream in self.streams}
        self.poll_interval_s = int(config["pollIntervalMs"]) / 1000
        self.last_batch_at = float("-inf")
        self.next_seq = {}
        for stream in self.streams:
            stored = context.offsets.offset({"stream": stream})
            self.next_seq[stream] = int(stored["seq"]) + 1 if stored else 1

    def poll(self) -> list[SourceRecord]:
        now = time.monotonic()
        if now - self.last_batch_at < self.poll_interval_s:
            return []
        self.last_batch_at = now
        records: list[SourceRecord] = []
        limit, next_seq, record = self.limit, self.next_seq, self._record
        while len(records) < self.batch_size:
            # One round: the next number of every live stream, while the batch has room.
            live = [s for s in self.streams if limit is None or next_seq[s] <= limit]
            if not live:
                break
            for stream in live[: self.batch_size - len(records)]:
                seq = next_seq[stream]
                records.append(record(stream, seq))
                next_seq[stream] = seq + 1
        return records

    def _record(self, stream: str, seq: int) -> SourceRecord:
        return SourceRecord(
            self.partitions[stream],
            {"seq": seq},
            self.bodies[stream].value(seq),
            stream.encode(),
        )


class SequenceConnector(SourceConnector):
    """Splits streams round-robin over tasks; resumes exactly, so declares EOS support."""

    task_class = SequenceTask

    def validate(self, config: Mapping[str, Any]) -> list[ConfigProblem]:
        merged = {**DEFAULTS, **config}
        problems = unknown_settings(config, DEFAULTS) + integer_problems(
            merged, {"streams": 1, "batchSize": 1, "padBytes": 0, "pollIntervalMs": 0}
        )
        if not problems and merged["streams"] > MAX_STREAMS:
            problems.append(
                ConfigProblem(
                    "streams", f"at most {MAX_STREAMS} (each is named in the tasks' ConfigMap)"
                )
            )
        limit = merged["limit"]
        if limit is not None and not is_int(limit, 1):
            problems.append(ConfigProblem("limit", "must be an integer >= 1, or omitted"))
        return problems

    def task_configs(self, config: Mapping[str, Any], max_tasks: int) -> list[dict[str, Any]]:
        merged = {**DEFAULTS, **config}
        count = min(max_tasks, merged["streams"])
        return [
            {
                **merged,
                "assigned": [stream_name(i) for i in range(merged["streams"]) if i % count == task],
            }
            for task in range(count)
        ]

    def exactly_once_support(self, config: Mapping[str, Any]) -> bool:
        return True

    def alter_offset(
        self, config: Mapping[str, Any], partition: SourcePartition, offset: SourceOffset
    ) -> SourceOffset:
        """``{seq: n}``: the stream resumes at n + 1 (0 replays it from 1)."""
        streams = {**DEFAULTS, **config}["streams"]
        names = {stream_name(i) for i in range(streams)}
        if set(partition) != {"stream"} or partition["stream"] not in names:
            raise OffsetRefusedError(
                f"partition {dict(partition)}: a partition is {{stream: s<i>}}, i below "
                f"streams ({streams})"
            )
        if set(offset) != {"seq"} or not is_int(offset["seq"], 0):
            raise OffsetRefusedError(
                f"offset {dict(offset)}: an offset is {{seq: n}}, the last number taken "
                "(n >= 0; 0 starts the stream over)"
            )
        return {"seq": int(offset["seq"])}

    def can_define_transaction_boundaries(self, config: Mapping[str, Any]) -> bool:
        return False
