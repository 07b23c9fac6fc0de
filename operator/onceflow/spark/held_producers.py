"""Transactional producers a Python worker keeps from one batch to the next.

A new producer costs a coordinator lookup and an initialisation, and its partition's
last marker must then be read back: more than a small batch's rows. A worker that
committed a partition's last batch already knows that marker, and its producer still
holds the id unless another producer initialised it since. That is checked by the
first record of its next transaction (``TransactionalWriter.send_acknowledged``), so a
producer that was taken over is dropped before it sends anything else.
"""

from __future__ import annotations

from dataclasses import dataclass

from onceflow.eos.worker_cache import KeptBetweenBatches
from onceflow.eos.writer import TransactionalWriter
from onceflow.logic.sink_markers import SinkMarker


@dataclass
class HeldProducer:
    writer: TransactionalWriter
    """Ready: initialised, no transaction open."""
    marker: SinkMarker | None
    """The partition's last committed marker as this producer knows it: the one it
    committed itself, or the one it read after initialising."""


# Keyed by bootstrap servers and transactional id.
HELD_PRODUCERS: KeptBetweenBatches[HeldProducer] = KeptBetweenBatches()
