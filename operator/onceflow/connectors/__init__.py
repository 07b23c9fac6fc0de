"""Connectors shipped with Onceflow, registered in the ``onceflow.connectors`` group."""

from onceflow.connectors.sequence import SequenceConnector

__all__ = ["SequenceConnector"]
