"""``postgres``: a PostgreSQL database as a source, by change data capture (``cdc``)
or by polling queries (``incrementing``, ``timestamp+incrementing``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from onceflow.api.connector import (
    Behind,
    ConfigProblem,
    Retention,
    SourceConnector,
    SourceOffset,
    SourcePartition,
    SourceRecord,
    SourceTask,
    TaskContext,
)
from onceflow.connectors.postgres.cdc import CdcTask
from onceflow.connectors.postgres.cdc_offsets import (
    alter_cdc_offset,
    check_cdc_offsets,
    forget_cdc_offset,
)
from onceflow.connectors.postgres.query import QueryTask
from onceflow.connectors.postgres.server_checks import source_problems
from onceflow.connectors.postgres.settings import DEFAULTS, problems
from onceflow.connectors.postgres.slot_retention import slot_retention


def _mode(config: Mapping[str, Any]) -> str:
    return str({**DEFAULTS, **config}["mode"])


class PostgresTask(SourceTask):
    """The mode's task, behind the one task class a connector names."""

    def start(self, context: TaskContext) -> None:
        super().start(context)
        self.inner: SourceTask = CdcTask() if _mode(context.config) == "cdc" else QueryTask()
        self.inner.start(context)

    def poll(self) -> list[SourceRecord]:
        return self.inner.poll()

    def commit_record(self, record: SourceRecord) -> None:
        self.inner.commit_record(record)

    def commit(self) -> None:
        self.inner.commit()

    def stop(self) -> None:
        self.inner.stop()

    def retained_bytes(self) -> int | None:
        return self.inner.retained_bytes()

    def behind(self) -> Behind | None:
        return self.inner.behind()


class PostgresConnector(SourceConnector):
    task_class = PostgresTask

    def validate(self, config: Mapping[str, Any]) -> list[ConfigProblem]:
        return problems(config)

    def check(
        self,
        config: Mapping[str, Any],
        secrets: Mapping[str, str],
        *,
        shares_task_filesystem: bool,
    ) -> list[ConfigProblem]:
        return source_problems(config, secrets)

    def retention(self, config: Mapping[str, Any], secrets: Mapping[str, str]) -> Retention | None:
        return slot_retention(config, secrets) if _mode(config) == "cdc" else None

    def task_configs(self, config: Mapping[str, Any], max_tasks: int) -> list[dict[str, Any]]:
        merged = {**DEFAULTS, **config}
        if _mode(config) == "cdc":
            return [merged]  # one slot, read in order by one task
        tables = list(merged["tables"])
        count = min(max_tasks, len(tables))
        return [{**merged, "tables": tables[i::count]} for i in range(count)]

    def exactly_once_support(self, config: Mapping[str, Any]) -> bool:
        return self.exactly_once_refusal(config) is None

    def exactly_once_refusal(self, config: Mapping[str, Any]) -> str | None:
        if _mode(config) == "timestamp+incrementing":
            return (
                "mode timestamp+incrementing re-reads updated rows and can miss a row "
                "whose timestamp moves backwards: use mode incrementing (new rows only) "
                "or cdc (every change)"
            )
        return None

    def can_define_transaction_boundaries(self, config: Mapping[str, Any]) -> bool:
        return _mode(config) == "cdc"

    def alter_offset(
        self, config: Mapping[str, Any], partition: SourcePartition, offset: SourceOffset
    ) -> SourceOffset:
        """CDC: ``{lsn: X}``, every transaction committed at or before X counts as
        delivered (``cdc_offsets`` says what it is stored as, and that it ends an
        unfinished snapshot). The polling modes do not say yet: refused by default."""
        if _mode(config) != "cdc":
            return super().alter_offset(config, partition, offset)
        return alter_cdc_offset(config, partition, offset)

    def forget_offset(self, config: Mapping[str, Any], partition: SourcePartition) -> None:
        """CDC: refused for the slot the source reads, which stays where the offset left
        it. A polling mode's table without an offset is read again from its start."""
        if _mode(config) == "cdc":
            forget_cdc_offset(config, partition)

    def check_offsets(
        self,
        config: Mapping[str, Any],
        secrets: Mapping[str, str],
        entries: Sequence[tuple[SourcePartition, SourceOffset | None]],
    ) -> dict[int, str]:
        """CDC: each lsn against the slot (released already, not yet written, no slot)."""
        return check_cdc_offsets(config, secrets, entries) if _mode(config) == "cdc" else {}
