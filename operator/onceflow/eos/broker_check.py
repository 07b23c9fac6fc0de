"""Asking a pipeline's Kafka whether it answers and accepts the login before any task
or driver starts, as a source's own system is asked (``connectors.checks``).

Without it, an unreachable or refusing broker surfaced minutes later and far from the
cause: tasks restarting with librdkafka's transport errors, or a transaction said to
have stayed open too long. A refusal here names the field that sets what is wrong."""

from __future__ import annotations

from collections.abc import Mapping

from confluent_kafka import KafkaError, KafkaException

from onceflow.api.errors import Problem
from onceflow.eos.clients import admin_client

BROKER_CHECK_S = 10.0
"""How long a broker has to answer a metadata request: a live one answers in
milliseconds, and librdkafka retries connection attempts within it."""

BOOTSTRAP_FIELD = "spec.kafka.bootstrapServers"
AUTH_FIELD = "spec.kafka.authSecretRef"


def broker_problems(
    bootstrap: str, extra: Mapping[str, str] | None = None, timeout_s: float = BROKER_CHECK_S
) -> list[Problem]:
    """Empty when a broker at ``bootstrap`` answered a metadata request with these
    settings; else what to fix, under the Pipeline's field."""
    # librdkafka's own connection-refused lines would repeat the finding every second.
    admin = admin_client(bootstrap, {**(extra or {}), "log_level": "0"})
    try:
        admin.list_topics(timeout=timeout_s)
    except KafkaException as failure:
        error: KafkaError = failure.args[0]
        if error.code() in (
            KafkaError._AUTHENTICATION,
            KafkaError.SASL_AUTHENTICATION_FAILED,
            KafkaError._SSL,
        ):
            return [
                Problem(
                    AUTH_FIELD,
                    f"the broker at {bootstrap} refused the login ({error.str()}): check the"
                    " Secret's SASL/TLS settings",
                    reason="KafkaUnreachable",
                )
            ]
        if error.code() in (KafkaError.CLUSTER_AUTHORIZATION_FAILED,):
            return [
                Problem(
                    AUTH_FIELD,
                    f"the broker at {bootstrap} denies this principal its metadata"
                    f" ({error.str()}): grant it Describe on the cluster and its topics",
                    reason="KafkaUnreachable",
                )
            ]
        return [
            Problem(
                BOOTSTRAP_FIELD,
                f"no Kafka broker answered at {bootstrap} within {timeout_s:.0f} s"
                f" ({error.str()}): check the address (and --bootstrap) and that the broker"
                " runs and is reachable from here",
                reason="KafkaUnreachable",
            )
        ]
    return []
