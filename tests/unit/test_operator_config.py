"""The operator's configuration read from its environment: every setting the chart and
the flags give, and a wrong value refused at start, naming its variable."""

from __future__ import annotations

import pytest

from onceflow.control.operator_config import OperatorConfig, OperatorConfigError, WebhookConfig
from onceflow.logic.requeue import RequeuePolicy


def test_an_empty_environment_is_the_defaults() -> None:
    config = OperatorConfig.from_environment({})
    assert config == OperatorConfig()
    assert config.webhook is None
    assert config.progress_deadline_s == 600.0
    assert config.hanging_after_s is None


def test_every_setting_is_read_from_its_variable() -> None:
    config = OperatorConfig.from_environment(
        {
            "ONCEFLOW_NAMESPACES": "b, a,,",
            "KUBECONFIG": "/k",
            "ONCEFLOW_RESYNC_S": "60",
            "ONCEFLOW_POLL_S": "0.5",
            "ONCEFLOW_MAX_POLL_S": "10",
            "ONCEFLOW_RESYNCS_PER_S": "2",
            "ONCEFLOW_MAX_RESYNC_S": "300",
            "ONCEFLOW_RECONCILE_WORKERS": "4",
            "ONCEFLOW_PEERING_LIFETIME_S": "20",
            "ONCEFLOW_FENCE_TIMEOUT_S": "12.5",
            "ONCEFLOW_PROGRESS_DEADLINE_S": "0",
            "ONCEFLOW_HANGING_LOOK_S": "5",
            "ONCEFLOW_HANGING_AFTER_S": "300",
            "ONCEFLOW_TASK_IMAGE": "registry.example/onceflow:1",
            "ONCEFLOW_CONNECTOR_MODULES": "acme",
        }
    )
    assert config.namespaces == ("a", "b")
    assert config.kubeconfig == "/k"
    assert config.requeue == RequeuePolicy(
        resync_s=60, first_poll_s=0.5, max_poll_s=10, resyncs_per_s=2, max_resync_s=300
    )
    assert (config.reconcile_workers, config.peering_lifetime_s) == (4, 20)
    assert config.fence_timeout_s == 12.5
    assert config.progress_deadline_s is None, "0 turns the deadline off"
    assert (config.hanging_look_s, config.hanging_after_s) == (5, 300)
    assert config.image.default == "registry.example/onceflow:1"
    assert config.policy.connector_modules == frozenset({"acme"})


def test_the_webhook_is_served_only_with_a_port() -> None:
    config = OperatorConfig.from_environment(
        {
            "ONCEFLOW_WEBHOOK_PORT": "9443",
            "ONCEFLOW_WEBHOOK_HOST": "onceflow.ns.svc",
            "ONCEFLOW_WEBHOOK_CERT_SECRET": "ns/onceflow-webhook",
            "ONCEFLOW_WEBHOOK_CONFIGURATION": "onceflow",
            "ONCEFLOW_WEBHOOK_MANAGED": "false",
        }
    )
    assert config.webhook == WebhookConfig(
        port=9443,
        host="onceflow.ns.svc",
        cert_secret="ns/onceflow-webhook",
        configuration="onceflow",
        managed=False,
    )


@pytest.mark.parametrize(
    ("variable", "value", "wanted"),
    [
        ("ONCEFLOW_FENCE_TIMEOUT_S", "30s", "a number of seconds"),
        ("ONCEFLOW_RESYNC_S", "-1", "a number of seconds"),
        ("ONCEFLOW_HANGING_LOOK_S", "nan", "a number of seconds"),
        ("ONCEFLOW_RESYNCS_PER_S", "5/s", "a number of passes a second"),
        ("ONCEFLOW_RECONCILE_WORKERS", "2.5", "a whole number"),
        ("ONCEFLOW_WEBHOOK_PORT", "https", "a whole number"),
    ],
)
def test_a_wrong_value_is_refused_naming_its_variable(
    variable: str, value: str, wanted: str
) -> None:
    with pytest.raises(OperatorConfigError) as refused:
        OperatorConfig.from_environment({variable: value})
    assert str(refused.value) == f"{variable}={value!r}: must be {wanted}, 0 or more"
