"""What pods say about their workload (pure: pod objects as the API server returns them)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from onceflow.logic.pod_health import PodProblem, creation_refused, pods_problem

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def _at(ago: timedelta) -> str:
    return (NOW - ago).strftime("%Y-%m-%dT%H:%M:%SZ")


def _pod(name: str, **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"phase": "Running", **status}}


def _restarted(
    code: int, ago: timedelta, restarts: int = 3, message: str = "", waiting: str = ""
) -> dict[str, Any]:
    return {
        "name": "driver",
        "restartCount": restarts,
        "state": {"waiting": {"reason": waiting}} if waiting else {"running": {}},
        "lastState": {
            "terminated": {
                "exitCode": code,
                "reason": "Error",
                "finishedAt": _at(ago),
                "message": message,
            }
        },
    }


def test_a_driver_that_keeps_exiting_is_failing_with_its_last_error() -> None:
    log = "batch 4 committed\npy4j.protocol.Py4JJavaError: UnknownTopicOrPartitionException\n"
    pod = _pod("agg-driver", containerStatuses=[_restarted(1, timedelta(seconds=90), 4, log)])
    assert pods_problem([pod], NOW) == PodProblem(
        "ContainerFailing",
        "pod agg-driver: container driver exited 1 (4 restarts): "
        "py4j.protocol.Py4JJavaError: UnknownTopicOrPartitionException",
    )


def test_an_old_failure_of_a_pod_that_runs_since_is_history() -> None:
    pod = _pod("agg-driver", containerStatuses=[_restarted(1, timedelta(hours=2))])
    assert pods_problem([pod], NOW) is None


def test_a_crash_loop_is_failing_however_long_ago_it_last_ran() -> None:
    status = _restarted(1, timedelta(hours=2), waiting="CrashLoopBackOff")
    found = pods_problem([_pod("t-g1-0", containerStatuses=[status])], NOW)
    assert found is not None and found.reason == "ContainerFailing"


def test_one_kill_the_kubelet_recovered_from_is_no_pattern() -> None:
    killed = _restarted(137, timedelta(seconds=30), restarts=1)
    assert pods_problem([_pod("t-g1-0", containerStatuses=[killed])], NOW) is None
    again = _restarted(137, timedelta(seconds=30), restarts=3)
    assert pods_problem([_pod("t-g1-0", containerStatuses=[again])], NOW) is not None
    clean = _restarted(0, timedelta(seconds=30), restarts=5)
    assert pods_problem([_pod("t-g1-0", containerStatuses=[clean])], NOW) is None


def test_an_executor_no_node_can_take_is_unschedulable_with_the_schedulers_words() -> None:
    pending = {
        "metadata": {"name": "agg-exec-1"},
        "status": {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/1 nodes are available: 1 Insufficient cpu.",
                }
            ],
        },
    }
    assert pods_problem([_pod("agg-driver"), pending], NOW) == PodProblem(
        "Unschedulable",
        "pod agg-exec-1 cannot be scheduled: 0/1 nodes are available: 1 Insufficient cpu.",
    )


def test_healthy_and_leaving_pods_say_nothing() -> None:
    leaving = _pod("old", containerStatuses=[_restarted(1, timedelta(seconds=5))])
    leaving["metadata"]["deletionTimestamp"] = _at(timedelta(seconds=1))
    assert pods_problem([_pod("agg-driver"), leaving], NOW) is None


def test_the_latest_failed_create_of_a_jobs_events_names_the_cause() -> None:
    refused = 'pods "copier-driver-" is forbidden: serviceaccount "onceflow-spark" not found'
    events = [
        {
            "reason": "FailedCreate",
            "message": "an older one",
            "lastTimestamp": "2026-11-28T10:00:00Z",
        },
        {"reason": "FailedCreate", "message": refused, "lastTimestamp": "2026-11-28T10:05:00Z"},
        {"reason": "SuccessfulCreate", "message": "x", "lastTimestamp": "2026-11-28T10:06:00Z"},
    ]
    assert creation_refused("Job copier-driver", events) == PodProblem(
        "FailedCreate", f"Job copier-driver cannot create its pod: {refused}"
    )
    assert creation_refused("Job copier-driver", events[2:]) is None
