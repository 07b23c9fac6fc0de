"""A polling ``postgres`` source pointed at a hot standby (a read replica) cannot be
exactly-once: its high-water mark sees only the standby's own transactions. The
pure decisions: which server and mode take exactly-once away, what the check before
any task starts does with that under ``exactlyOnceSupport: required`` and
``requested``, and what a task finding it at start does. The real standby is in
tests/integration/test_postgres_standby.py."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pytest

from onceflow.api import ExactlyOnceMode, KafkaSource, KafkaSourceSpec, Pipeline
from onceflow.api.check_verdict import judge_source_check
from onceflow.api.connector import (
    ConfigProblem,
    ConnectorError,
    SourceConnector,
    TaskContext,
)
from onceflow.api.source import ExactlyOnceSupport
from onceflow.api.task import FileAuthority, TaskSettings
from onceflow.connectors.checks import SOURCE_SYSTEM_REFUSED, source_system_problems
from onceflow.connectors.postgres import PostgresConnector, query
from onceflow.connectors.postgres.server_checks import standby_problem
from onceflow.connectors.registry import load_connector
from onceflow.eos.offsets import StoredOffsets
from onceflow.logic.resolve import resolve_source
from onceflow.model.tasks import DesiredTasks

QUERY = {
    "mode": "incrementing",
    "url": "postgresql://app@replica:5432/shop",
    "tables": ["public.orders"],
    "incrementingColumn": "id",
}
STANDBY = ConfigProblem("url", "the server is a hot standby", exactly_once_only=True)
MISSING = ConfigProblem("tables", "table public.nope does not exist")


@pytest.mark.parametrize(
    ("mode", "recovering", "refused"),
    [
        ("incrementing", True, True),
        ("timestamp+incrementing", True, True),
        ("cdc", True, False),  # decoded in commit order wherever it is decoded
        ("incrementing", False, False),
        ("timestamp+incrementing", False, False),
        ("cdc", False, False),
    ],
)
def test_only_a_polling_mode_on_a_standby_loses_exactly_once(
    mode: str, recovering: bool, refused: bool
) -> None:
    problem = standby_problem(mode, recovering)
    if not refused:
        assert problem is None
        return
    assert problem is not None
    assert problem.field == "url"
    assert problem.exactly_once_only, "a standby can still be polled at-least-once"
    assert "hot standby" in problem.message
    assert f"mode {mode}" in problem.message
    assert "point url at the primary" in problem.message


@pytest.mark.parametrize(
    ("support", "found", "refused", "waived"),
    [
        ("required", [STANDBY], ["url"], []),
        ("requested", [STANDBY], [], ["url"]),
        ("required", [MISSING, STANDBY], ["tables", "url"], []),
        ("requested", [MISSING, STANDBY], ["tables"], ["url"]),
        ("required", [MISSING], ["tables"], []),
        ("requested", [MISSING], ["tables"], []),
        ("required", [], [], []),
        ("requested", [], [], []),
    ],
)
def test_a_problem_that_only_takes_exactly_once_away_refuses_only_when_it_is_required(
    support: str, found: list[ConfigProblem], refused: list[str], waived: list[str]
) -> None:
    verdict = judge_source_check(ExactlyOnceSupport(support), found)
    assert [p.field for p in verdict.refusals] == refused
    assert [p.field for p in verdict.waived] == waived


def test_a_required_refusal_names_both_fixes_and_other_problems_keep_their_words() -> None:
    verdict = judge_source_check(ExactlyOnceSupport.REQUIRED, [MISSING, STANDBY])
    missing, standby = verdict.refusals
    assert missing == MISSING
    assert standby.message.startswith("the server is a hot standby")
    assert "set spec.exactlyOnceSupport: requested" in standby.message


class _ReplicaConnector(PostgresConnector):
    """The postgres connector, its check answering as a standby's would."""

    def check(
        self,
        config: Mapping[str, Any],
        secrets: Mapping[str, str],
        *,
        shares_task_filesystem: bool,
    ) -> list[ConfigProblem]:
        problem = standby_problem(str(config["mode"]), recovering=True)
        return [problem] if problem else []


def _spec(support: str) -> KafkaSourceSpec:
    return KafkaSourceSpec.model_validate(
        {
            "pipeline": "p",
            "topic": "orders",
            "exactlyOnceSupport": support,
            "connector": {"type": "postgres", "config": QUERY},
        }
    )


def test_the_source_check_refuses_a_standby_only_when_exactly_once_is_required(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def load(_type: str) -> SourceConnector:
        return _ReplicaConnector()

    (problem,) = source_system_problems(
        _spec("required"), {}, shares_task_filesystem=False, load=load
    )
    assert problem.field == "spec.connector.config.url"
    assert problem.reason == SOURCE_SYSTEM_REFUSED
    assert "hot standby" in problem.message
    assert "point url at the primary" in problem.message
    assert "set spec.exactlyOnceSupport: requested" in problem.message

    with caplog.at_level(logging.WARNING, logger="onceflow.connectors.checks"):
        assert (
            source_system_problems(_spec("requested"), {}, shares_task_filesystem=False, load=load)
            == []
        )
    assert "runs without exactly-once" in caplog.text
    assert "spec.connector.config.url" in caplog.text


@pytest.mark.parametrize("required", [True, False])
def test_a_task_refuses_or_warns_as_the_source_requires(required: bool) -> None:
    context = TaskContext(
        task_id=0, config={}, offsets=StoredOffsets(), exactly_once_required=required
    )
    if required:
        with pytest.raises(ConnectorError, match=r"^config\.url: the server is a hot standby"):
            context.refuse_or_warn(STANDBY)
        with pytest.raises(ConnectorError, match=r"spec\.exactlyOnceSupport: requested"):
            context.refuse_or_warn(STANDBY)
    else:
        warning = context.refuse_or_warn(STANDBY)
        assert warning.startswith("config.url: the server is a hot standby")
        assert "runs without exactly-once" in warning


class _StandbyConnection:
    """Answers ``pg_is_in_recovery()`` as a standby; any other statement is a bug."""

    def __init__(self) -> None:
        self.statements: list[str] = []
        self.closed = False

    def execute(self, statement: str, *_args: Any) -> _StandbyConnection:
        self.statements.append(statement)
        assert statement == "SELECT pg_is_in_recovery()", statement
        return self

    def fetchone(self) -> tuple[bool]:
        return (True,)

    def close(self) -> None:
        self.closed = True


def test_a_query_task_on_a_standby_stops_before_reading_when_exactly_once_is_required(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    conn = _StandbyConnection()
    monkeypatch.setattr(query, "connect", lambda *_args: conn)
    context = TaskContext(
        task_id=0, config=QUERY, offsets=StoredOffsets(), exactly_once_required=True
    )
    with pytest.raises(ConnectorError, match=r"config\.url: the server is a hot standby"):
        query.QueryTask().start(context)
    assert conn.statements == ["SELECT pg_is_in_recovery()"], "no table was read"
    assert conn.closed


def test_tasks_are_told_whether_exactly_once_is_required_and_a_change_is_a_new_generation() -> None:
    pipeline = Pipeline.model_validate(
        {"metadata": {"name": "p"}, "spec": {"kafka": {"bootstrapServers": "k:9092"}}}
    )

    def planned(support: str | None) -> DesiredTasks:
        spec: dict[str, Any] = {
            "pipeline": "p",
            "topic": "orders",
            "connector": {"type": "sequence", "config": {"streams": 1}},
        }
        if support is not None:
            spec["exactlyOnceSupport"] = support
        source = KafkaSource.model_validate({"metadata": {"name": "s"}, "spec": spec})
        desired = resolve_source(source, pipeline, load_connector, where="in the test")
        assert not isinstance(desired, list), desired
        return desired

    default, requested, required = planned(None), planned("requested"), planned("required")
    assert default.fingerprint == requested.fingerprint
    assert required.fingerprint != requested.fingerprint
    for desired, support in ((requested, "requested"), (required, "required")):
        (settings,) = desired.settings(1, FileAuthority(path="/state"))
        assert settings.exactly_once_support == ExactlyOnceSupport(support)


def test_settings_an_older_operator_wrote_do_not_require_exactly_once() -> None:
    """Those tasks were never told, so they go on as before: warning, not stopping."""
    settings = TaskSettings(
        source="s",
        task_id=0,
        generation=1,
        mode=ExactlyOnceMode.ENABLED,
        bootstrap_servers="k:9092",
        topic="t",
        offsets_topic="o",
        transactional_id="p/source/s/0",
        connector_type="postgres",
        authority=FileAuthority(path="/state"),
    )
    wire = settings.to_wire()
    del wire["exactlyOnceSupport"]
    older = TaskSettings.model_validate(wire)
    assert older.exactly_once_support is ExactlyOnceSupport.REQUESTED
