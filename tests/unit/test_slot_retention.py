"""When a CDC slot's retained WAL makes a source Degraded, and what status says."""

from __future__ import annotations

from onceflow.api.source import RetentionStatus
from onceflow.connectors.postgres.slot_retention import judge
from onceflow.logic.source_status import RETAINS_TOO_MUCH, retention_condition

GIB = 1024**3


def test_the_configured_limit_holds_while_the_server_keeps_wal_without_bound() -> None:
    found = judge("orders", 3 * GIB, 10 * GIB, keep_size=None)
    assert (found.limit_bytes, found.what) == (10 * GIB, "WAL kept by replication slot orders")
    assert found.limit_from.startswith("config.maxRetainedWalBytes")


def test_a_server_that_would_drop_the_slot_earlier_lowers_the_limit_below_its_cap() -> None:
    found = judge("orders", 3 * GIB, 10 * GIB, keep_size=4 * GIB)
    assert found.limit_bytes == int(0.8 * 4 * GIB)
    assert "max_slot_wal_keep_size" in found.limit_from
    assert judge("orders", 0, GIB, keep_size=100 * GIB).limit_bytes == GIB


def test_degraded_only_over_the_limit_naming_the_slot_the_size_and_the_setting() -> None:
    assert retention_condition(None) == (False, "Healthy", "")
    under = RetentionStatus.measured(judge("orders", GIB, 10 * GIB, keep_size=None))
    assert retention_condition(under)[0] is False
    over = RetentionStatus.measured(judge("orders", 12 * GIB, 10 * GIB, keep_size=None))
    degraded, reason, message = retention_condition(over)
    assert (degraded, reason) == (True, RETAINS_TOO_MUCH)
    assert "replication slot orders: 12.0 GiB, over the limit of 10.0 GiB" in message
    assert "config.maxRetainedWalBytes" in message
