"""How long a CDC task keeps trying to get a lost connection back: ``reconnectTimeoutMs``
from when it was lost. A terminated backend or a restarting server (which refuses
connections for a moment) passes by within it; an outage that outlasts it ends the task
with an error naming ``config.url``, rather than leaving it retrying unseen."""

from __future__ import annotations

import time
from collections.abc import Mapping

from onceflow.api.connector import ConnectorError
from onceflow.connectors.settings import masked

# Between attempts: a restarting server is back within seconds, and trying faster only
# fills its log with refused connections.
RECONNECT_PAUSE_S = 0.5


class Outage:
    """One connection's time without an answer; the error it ends with is masked with
    the connector's secrets."""

    def __init__(self, timeout_s: float, secrets: Mapping[str, str]) -> None:
        self.timeout_s = timeout_s
        self.secrets = secrets
        self.since: float | None = None
        """When the connection was lost; None while it answers."""

    def start(self) -> None:
        """The connection was just lost: the timeout runs from now."""
        self.since = time.monotonic()

    def end(self) -> None:
        self.since = None

    def pause_or_give_up(self, what: str, error: Exception) -> None:
        """An attempt failed with ``error``: pauses before the next one, or, once the
        outage has outlasted the timeout, raises a ConnectorError saying that ``what``
        did not happen within it."""
        self.since = self.since or time.monotonic()
        if time.monotonic() - self.since > self.timeout_s:
            raise ConnectorError(
                f"config.url: {what} within reconnectTimeoutMs ({masked(str(error), self.secrets)})"
            ) from None
        time.sleep(RECONNECT_PAUSE_S)
