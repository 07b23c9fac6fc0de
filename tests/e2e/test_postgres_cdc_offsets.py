"""A stopped CDC source's offset set past a poison transaction, under ``onceflow run``,
against a real PostgreSQL and broker: an lsn the slot has released is refused and
changes nothing; one between the poison transaction and the next skips exactly the
poison one, and every later change arrives once."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml

from tests.e2e.test_postgres_cdc import CdcExample, _changes
from tests.support.cdc import drop_slot
from tests.support.cli import onceflow
from tests.support.onceflow_run import start_run
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.postgres]


def _manifest(example: CdcExample, **source: Any) -> str:
    documents = list(yaml.safe_load_all(example.text))
    for document in documents:
        if document["kind"] == "KafkaSource":
            document["spec"] |= source
    return yaml.safe_dump_all(documents)


def _updated(bootstrap: str, topic: str) -> list[int]:
    return sorted(key for key, value in _changes(bootstrap, topic) if value["op"] == "u")


def _committed(dsn: str, statement: str) -> str:
    """Runs ``statement`` in its own transaction; the WAL position after its commit."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(statement.encode())
        row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
    assert row is not None
    return str(row[0])


def test_a_stopped_cdc_source_set_past_a_poison_transaction_skips_it_and_only_it(
    kafka_bootstrap: str, postgres_dsn: str, tmp_path: Path
) -> None:
    example = CdcExample.created(postgres_dsn, kafka_bootstrap, tmp_path)
    table, topic, log = example.table, example.topic, tmp_path / "run.log"
    run = start_run(example.manifest, tmp_path, log)
    try:
        wait_for(lambda: len(_changes(kafka_bootstrap, topic)) >= 1000, 120, "the snapshot")
        example.manifest.write_text(_manifest(example, state="stopped"))
        wait_for(lambda: "orders: stopped; offsets kept" in log.read_text(), 60, "stopped")
        listed = onceflow(
            "offsets", "list", "-f", str(example.manifest), "--source", "orders",
            "--state-dir", str(tmp_path),
        )  # fmt: skip
        assert listed.returncode == 0, listed.stderr
        (entry,) = yaml.safe_load(listed.stdout)
        assert entry["partition"]["slot"] == example.slot, entry

        poison = f"UPDATE {table} SET status = 'poison', version = version + 1 WHERE id <= 5"
        after_poison = _committed(postgres_dsn, poison)
        _committed(postgres_dsn, f"UPDATE {table} SET version = version + 1 WHERE id > 995")

        def change(change_id: str, lsn: str) -> dict[str, Any]:
            offset = {"partition": entry["partition"], "offset": {"lsn": lsn}}
            return {"id": change_id, "offsets": [offset]}

        example.manifest.write_text(
            _manifest(example, state="stopped", offsetsChange=change("behind", "0/1"))
        )
        wait_for(lambda: "offsets change behind refused" in log.read_text(), 60, "refused")
        assert "confirmed_flush_lsn" in log.read_text().split("offsets change behind refused")[1]
        skip = change("skip-poison", after_poison)
        example.manifest.write_text(_manifest(example, state="stopped", offsetsChange=skip))
        wait_for(lambda: "offsets change skip-poison applied" in log.read_text(), 60, "applied")
        example.manifest.write_text(_manifest(example, offsetsChange=skip))
        wait_for(lambda: len(_updated(kafka_bootstrap, topic)) >= 5, 120, "the later changes")
    finally:
        run.send_signal(signal.SIGTERM)
        run.wait(60)
    assert _updated(kafka_bootstrap, topic) == [996, 997, 998, 999, 1000], (
        "the poison transaction's updates (ids 1-5) skipped, the next one's arrived once"
    )
    drop_slot(postgres_dsn, example.slot)
