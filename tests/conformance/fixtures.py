"""How a kit's subject asks for the session fixtures it needs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

FixtureLookup = Callable[[str], Any]
"""``request.getfixturevalue``: a session fixture's value by its name, so a subject
that needs no PostgreSQL never starts it."""
