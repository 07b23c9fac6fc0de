"""Which connectors the operator imports: installed entry points always, module
references only from modules the platform allows, and nothing imported otherwise."""

from __future__ import annotations

import sys

import pytest

from onceflow.connectors.registry import UnknownConnectorError, load_connector, operator_loader


def test_installed_connectors_load_anywhere() -> None:
    assert type(operator_loader(())("sequence")).__name__ == "SequenceConnector"


def test_a_module_reference_outside_the_allowed_modules_is_never_imported() -> None:
    sys.modules.pop("tests.support.connectors", None)
    with pytest.raises(UnknownConnectorError, match=r"tenants\.connectorModules"):
        operator_loader(("tests.supporting",))("tests.support.connectors:AtLeastOnceConnector")
    assert "tests.support.connectors" not in sys.modules, "refused before importing"


def test_allowed_modules_cover_their_packages() -> None:
    loaded = operator_loader(("tests.support",))("tests.support.connectors:AtLeastOnceConnector")
    assert type(loaded).__name__ == "AtLeastOnceConnector"


def test_a_task_loads_what_its_pod_has() -> None:
    loaded = load_connector("tests.support.connectors:AtLeastOnceConnector")
    assert type(loaded).__name__ == "AtLeastOnceConnector"
