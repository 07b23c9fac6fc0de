"""Kafka's rules for topic names, for every field that names a topic.

A name Kafka refuses is otherwise accepted by ``kubectl apply``, ``onceflow render`` and
``onceflow run`` and found only when a task or driver creates the topic: the task
crash-loops with the reason in its log alone. Names beginning with '__', which Kafka
keeps for its own topics, are refused too. The same rule goes into the CRD schema
(``pattern``), and names Onceflow builds from other fields (a default offsets topic,
a sink's marker topic) are checked with ``topic_name_problem``.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field

TOPIC_NAME_MAX = 249
"""Kafka's limit, so that a partition's directory name (topic-partition) fits 255."""
LEGAL_CHARACTER = re.compile(r"[a-zA-Z0-9._-]")
INTERNAL_PREFIX = "__"
"""How Kafka's own topics begin (``__consumer_offsets``, ``__transaction_state``).
Kafka lets a client create other such names, but a workload writing one of its own
corrupts the cluster's group offsets or transactions, and one reading it gets Kafka's
bookkeeping, not records: refused, with a message saying why."""
# Legal characters, not "." or "..", and not beginning with "__": one alternative per
# first character (a letter, digit or '-'; '_' alone or followed by anything but '_';
# '.' with a character other than '.' after it; or only dots, legal from three on). No
# look-ahead: the API server's regular expressions (RE2) have none.
TOPIC_PATTERN = (
    r"^(?:[a-zA-Z0-9-][a-zA-Z0-9._-]*"
    r"|_(?:[a-zA-Z0-9.-][a-zA-Z0-9._-]*)?"
    r"|\.[a-zA-Z0-9._-]*[a-zA-Z0-9_-][a-zA-Z0-9._-]*"
    r"|\.{3,})$"
)
TOPIC_RULE = (
    "ASCII letters, digits, '.', '_' and '-', at most 249 characters, not '.' or '..', "
    "not beginning with '__'"
)


def topic_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a workload's topic (Kafka refuses it, or it is named like
    Kafka's own topics), or None."""
    if not name:
        return "a topic name cannot be empty"
    if len(name) > TOPIC_NAME_MAX:
        return f"{len(name)} characters; Kafka takes at most {TOPIC_NAME_MAX}"
    illegal = sorted({c for c in name if not LEGAL_CHARACTER.fullmatch(c)})
    if illegal:
        return (
            f"{name!r} has {', '.join(map(repr, illegal))}; a Kafka topic name has only "
            f"{TOPIC_RULE}"
        )
    if name.startswith(INTERNAL_PREFIX):
        return (
            f"{name!r} begins with {INTERNAL_PREFIX!r} like Kafka's internal topics "
            "(__consumer_offsets, __transaction_state), which hold the cluster's group "
            "offsets and transactions, not records; choose a name that does not"
        )
    if not re.match(TOPIC_PATTERN, name):
        return f"{name!r} is not a topic name Kafka accepts ({TOPIC_RULE})"
    return None


def _valid_topic(name: str) -> str:
    problem = topic_name_problem(name)
    if problem:
        raise ValueError(problem)
    return name


TopicName = Annotated[
    str,
    Field(min_length=1, max_length=TOPIC_NAME_MAX, json_schema_extra={"pattern": TOPIC_PATTERN}),
    AfterValidator(_valid_topic),
]
"""A field naming a Kafka topic: checked here with a message saying the rule, and by
the API server through the schema's ``pattern`` (the same expression)."""
