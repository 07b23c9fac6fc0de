"""Finding connector plugins: entry points of the ``onceflow.connectors`` group, or a
``package.module:Class`` reference (Kafka Connect's ``connector.class`` habit)."""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from onceflow.api.connector import SourceConnector

ENTRY_POINT_GROUP = "onceflow.connectors"


class UnknownConnectorError(LookupError):
    """``spec.connector.type`` names no installed plugin."""


def available_connectors() -> list[str]:
    return sorted(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))


def load_connector(type_name: str) -> SourceConnector:
    """An instance of the connector named by ``spec.connector.type``."""
    if ":" in type_name:
        module_name, _, attribute = type_name.partition(":")
        try:
            target = getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError) as error:
            raise UnknownConnectorError(f"cannot import {type_name!r} ({error})") from None
    else:
        matches = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == type_name]
        if not matches:
            raise UnknownConnectorError(
                f"unknown connector {type_name!r}; installed: "
                f"{', '.join(available_connectors()) or 'none'} (or use package.module:Class)"
            )
        target = matches[0].load()
    if not (isinstance(target, type) and issubclass(target, SourceConnector)):
        raise UnknownConnectorError(f"{type_name!r} is not a SourceConnector subclass")
    return target()
