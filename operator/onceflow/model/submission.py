"""How each ``spec.submitter`` is rendered, found and read, so the reconciler and
``onceflow render`` treat the Spark operator's SparkApplication and the spark-submit
Job the same way."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from onceflow.api.driver import SparkJobSettings
from onceflow.api.spark import SparkJob, Submitter
from onceflow.model.objects import WorkloadImage
from onceflow.model.spark_app import Manifest, spark_application, spark_application_state
from onceflow.model.spark_submit import submit_job, submit_job_name, submit_job_state


@dataclass(frozen=True)
class Submission:
    api_version: str
    plural: str
    object_name: Callable[[str], str]
    render: Callable[[SparkJob, SparkJobSettings, WorkloadImage, str], Manifest]
    state: Callable[[Manifest | None], str | None]
    """The state in the Spark operator's words: RUNNING, FAILED, COMPLETED, ..."""
    propagation: str
    """How deleting it cascades. A Job is deleted in the foreground so that its driver
    pod is gone before the object is, and a new driver never overlaps the old one."""


SUBMISSIONS = {
    Submitter.SPARK_OPERATOR: Submission(
        api_version="sparkoperator.k8s.io/v1beta2",
        plural="sparkapplications",
        object_name=lambda job: job,
        render=spark_application,
        state=spark_application_state,
        propagation="Background",
    ),
    Submitter.SPARK_SUBMIT: Submission(
        api_version="batch/v1",
        plural="jobs",
        object_name=submit_job_name,
        render=submit_job,
        state=submit_job_state,
        propagation="Foreground",
    ),
}


def submission_of(job: SparkJob) -> Submission:
    return SUBMISSIONS[job.spec.submitter]
