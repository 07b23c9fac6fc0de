"""Connectors that exist only to exercise the runtime's edges in tests.

They are loaded by ``package.module:Class`` reference, like any user connector."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from onceflow.api.connector import ConfigProblem, SourceRecord, SourceTask, TaskContext
from onceflow.connectors.sequence import SequenceConnector, SequenceTask


class AtLeastOnceConnector(SequenceConnector):
    """A connector that cannot resume exactly, so it declares no EOS support."""

    def exactly_once_support(self, config: Mapping[str, Any]) -> bool:
        return False


class AbortSecondBatchTask(SequenceTask):
    """Commits its first batch, asks to abort the second, then goes idle."""

    def poll(self) -> list[SourceRecord]:
        self.batches = getattr(self, "batches", 0)
        if self.batches >= 2:
            return []
        records = super().poll()
        self.batches += 1
        assert self.context.transactions is not None
        if self.batches == 1:
            self.context.transactions.commit_transaction()
        else:
            self.context.transactions.abort_transaction()
        return records


class AbortSecondBatchConnector(SequenceConnector):
    task_class = AbortSecondBatchTask

    def can_define_transaction_boundaries(self, config: Mapping[str, Any]) -> bool:
        return True


class GroupsOfThreeTask(SequenceTask):
    """One record per poll; records come in groups of three that share the offset
    ``{"group": g}`` and the task asks to commit after the third. After emitting
    ``stallAfter`` records it goes idle, leaving its open group unfinished."""

    def start(self, context: TaskContext) -> None:
        SourceTask.start(self, context)  # not the sequence's: its offsets are groups
        stored = context.offsets.offset({"stream": "s0"})
        self.next = 3 * (int(stored["group"]) + 1) + 1 if stored else 1
        self.stall_after = int(context.config.get("stallAfter") or 0)

    def poll(self) -> list[SourceRecord]:
        if self.stall_after and self.next > self.stall_after:
            return []
        seq, self.next = self.next, self.next + 1
        record = SourceRecord(
            source_partition={"stream": "s0"},
            source_offset={"group": (seq - 1) // 3},
            key=b"s0",
            value=json.dumps({"stream": "s0", "seq": seq}).encode(),
        )
        if seq % 3 == 0:
            assert self.context.transactions is not None
            self.context.transactions.commit_transaction_after(record)
        return [record]


class GroupsOfThreeConnector(SequenceConnector):
    task_class = GroupsOfThreeTask

    def validate(self, config: Mapping[str, Any]) -> list[ConfigProblem]:
        return []

    def can_define_transaction_boundaries(self, config: Mapping[str, Any]) -> bool:
        return True
