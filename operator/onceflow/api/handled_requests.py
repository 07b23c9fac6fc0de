"""Which one-off requests (an offsets change, an input reset) were handled already.

A request carries an id and is applied once per id, so that applying the same
manifest again repeats nothing. Comparing with the last id alone was not enough: a
manifest re-applied from Git (an Argo CD rollback, a revert) brings back an older
change, whose id differs from the last one handled, and would have reset offsets a
second time. So the status remembers the ids handled before the last, newest last.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import Field

REMEMBERED_IDS = 32
"""Earlier ids kept besides the last: a status stays small, and a request older than
that many later ones is one nobody re-applies by accident."""


def earlier_field(requests: str) -> Any:
    """The status field of the ids handled before the last (``requests``: what they
    are, plural), as both kinds of request describe it."""
    return Field(
        default_factory=list,
        max_length=REMEMBERED_IDS,
        description=f"Ids of the {requests} handled before this one, newest last (at most "
        f"{REMEMBERED_IDS}): one whose id is here is not applied again either, so a "
        "manifest re-applied from Git with an older one repeats nothing.",
    )


def handled(request_id: str, last_id: str | None, earlier: Sequence[str]) -> bool:
    return request_id == last_id or request_id in earlier


def earlier_ids(last_id: str | None, earlier: Sequence[str], new_id: str) -> tuple[str, ...]:
    """The ids handled before ``new_id`` once its outcome replaces the last one: the
    same while one request moves on (Applying, then Applied), else the last one joins
    them and the oldest beyond ``REMEMBERED_IDS`` leaves."""
    if last_id is None or last_id == new_id:
        return tuple(earlier)
    kept = [each for each in earlier if each != last_id]
    return (*kept, last_id)[-REMEMBERED_IDS:]
