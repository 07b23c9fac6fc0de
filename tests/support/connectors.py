"""Connectors that exist only to exercise the runtime's edges in tests.

They are loaded by ``package.module:Class`` reference, like any user connector."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from onceflow.api.connector import SourceRecord
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
