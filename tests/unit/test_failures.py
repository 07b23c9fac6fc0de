"""What status says about a failed pass, and which failures it stays quiet about."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import KafkaError, KafkaException
from kubernetes.client.exceptions import ApiException
from pydantic import BaseModel, ValidationError

from onceflow.control.errors import InvalidWorkloadError, RetryLaterError
from onceflow.control.failures import ReportedFailureError, describe_failure, reporting_failures
from onceflow.logic.client_keys import (
    ACCEPTED_SECRET_KEYS,
    refusal_message,
    refused_secret_keys,
)


def _latest() -> dict[str, object]:
    return {"metadata": {"name": "x"}}


def _api(status: int, message: str) -> ApiException:
    error = ApiException(status=status, reason="Reason")
    error.body = json.dumps({"kind": "Status", "message": message})
    return error


def test_a_refused_request_names_what_the_api_server_said_and_where_to_look() -> None:
    failure = describe_failure(_api(403, 'pods "counter-g1-0" is forbidden: by policy'))
    assert failure is not None and failure.reason == "Forbidden"
    assert 'pods "counter-g1-0" is forbidden: by policy' in failure.message
    assert "RBAC" in failure.message and "Pod Security" in failure.message
    invalid = describe_failure(_api(422, "spec.containers[0].resources: bad quantity"))
    assert invalid is not None and invalid.reason == "ApiError422"
    assert "bad quantity" in invalid.message


@pytest.mark.parametrize("status", [409, 429, 500, 503])
def test_races_and_a_busy_api_server_are_only_retried(status: int) -> None:
    assert describe_failure(_api(status, "try again")) is None


def test_kafka_client_errors_are_reported_unless_retriable() -> None:
    config = KafkaException(KafkaError(KafkaError._INVALID_ARG, "No such configuration"))
    failure = describe_failure(config)
    assert failure is not None and failure.reason == "KafkaClientError"
    assert "No such configuration" in failure.message and "authSecretRef" in failure.message
    away = KafkaException(KafkaError(KafkaError._TRANSPORT, "down", retriable=True))
    assert describe_failure(away) is None
    assert describe_failure(ConnectionResetError()) is None


def test_a_spec_the_model_refuses_names_the_field() -> None:
    class Spec(BaseModel):
        tasks_max: int

    with pytest.raises(ValidationError) as refused:
        Spec.model_validate({"tasks_max": "many"})
    failure = describe_failure(refused.value)
    assert failure is not None and failure.reason == "InvalidSpec"
    assert "tasks_max" in failure.message


def test_an_unknown_failure_is_reported_with_its_type() -> None:
    failure = describe_failure(KeyError("spec"))
    assert failure is not None and failure.reason == "ReconcileError"
    assert "KeyError" in failure.message


def test_reporting_degrades_then_raises_so_the_loop_backs_off() -> None:
    reported: list[tuple[str, str]] = []

    def degrade(_obj: object, reason: str, message: str) -> None:
        reported.append((reason, message))

    def fails() -> bool:
        raise _api(403, "forbidden")

    with pytest.raises(ReportedFailureError) as raised:
        reporting_failures(fails, _latest, degrade)
    assert reported[0][0] == "Forbidden" and not raised.value.unexpected

    def broken() -> bool:
        raise KeyError("x")

    with pytest.raises(ReportedFailureError) as unexpected:
        reporting_failures(broken, _latest, degrade)
    assert unexpected.value.unexpected, "a bug's traceback belongs in the log"


def test_an_invalid_workload_is_degraded_and_the_pass_answers_unsettled() -> None:
    reported: list[tuple[str, str]] = []

    def invalid() -> bool:
        raise InvalidWorkloadError("SecretNotFound", "create it")

    assert reporting_failures(invalid, _latest, lambda _o, r, m: reported.append((r, m))) is False
    assert reported == [("SecretNotFound", "create it")]


def test_waiting_and_transient_failures_leave_status_alone() -> None:
    reported: list[tuple[str, str]] = []

    def waits() -> bool:
        raise RetryLaterError("not yet")

    def blips() -> bool:
        raise _api(503, "away")

    with pytest.raises(RetryLaterError):
        reporting_failures(waits, _latest, lambda _o, r, m: reported.append((r, m)))
    with pytest.raises(ApiException):
        reporting_failures(blips, _latest, lambda _o, r, m: reported.append((r, m)))
    assert reported == []


def test_a_failure_that_cannot_be_written_is_still_raised() -> None:
    def fails() -> bool:
        raise _api(400, "bad")

    def cannot_write(_obj: object, reason: str, message: str) -> None:
        raise _api(503, "away")

    with pytest.raises(ReportedFailureError):
        reporting_failures(fails, _latest, cannot_write)


def test_a_failure_of_an_object_deleted_meanwhile_writes_nothing() -> None:
    def fails() -> bool:
        raise _api(403, "forbidden")

    def must_not_write(_obj: object, reason: str, message: str) -> None:
        raise AssertionError("no object to write to")

    with pytest.raises(ReportedFailureError):
        reporting_failures(fails, lambda: None, must_not_write)


def test_a_secret_gives_the_operator_credentials_only() -> None:
    settings = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "u",
        "sasl.password": "p",
        "ssl.ca.pem": "-----BEGIN CERTIFICATE-----",
        "plugin.library.paths": "/tmp/evil.so",
        "ssl.engine.location": "/tmp/engine.so",
        "sasl.oauthbearer.token.endpoint.url": "http://169.254.169.254/",
        "ssl.ca.location": "/var/run/secrets/kubernetes.io/serviceaccount/token",
    }
    refused = refused_secret_keys(settings, frozenset())
    assert refused == [
        "plugin.library.paths",
        "sasl.oauthbearer.token.endpoint.url",
        "ssl.ca.location",
        "ssl.engine.location",
    ]
    platform = frozenset({"ssl.ca.location", "sasl.oauthbearer.token.endpoint.url"})
    assert refused_secret_keys(settings, platform) == [
        "plugin.library.paths",
        "ssl.engine.location",
    ]
    message = refusal_message("kafka-auth", ["plugin.library.paths"])
    assert "Secret 'kafka-auth'" in message and "'plugin.library.paths'" in message
    assert "tenants.kafkaSecretKeys" in message
    assert all(key in message for key in ACCEPTED_SECRET_KEYS)
