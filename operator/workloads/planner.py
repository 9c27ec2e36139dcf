"""Launch a Rebalance's planner workload and read its outcome (the operator's side).

The Job comes from the pure builder in ``spindle.operator.specs.planner``; this module only
creates it (once: a Job's template cannot change, a new plan is a new Job) and reads back the
Job's state and the ConfigMap the job wrote. The Job's ServiceAccount is the chart's
(``planner.namespaces``): the operator checks that it exists, since a Job whose account is
missing never gets a Pod and says so only in Events nobody links to the Rebalance.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spindle.operator.kube import CONFIGMAPS, JOBS, PODS, SERVICEACCOUNTS, KubeApi, KubeError
from spindle.operator.specs import planner as builders
from spindle.operator.workloads import plan_job

#: Where ``plan_job.py`` is in the Spindle image: the same path as in the operator's own
#: installation, since the operator runs from the same image.
PLAN_JOB_FILE = str(Path(plan_job.__file__).resolve())


@dataclass(frozen=True)
class JobState:
    """``Running``, ``Succeeded`` or ``Failed``, with the reason when it failed."""

    phase: str
    message: str = ""


class PlannerAccountMissing(Exception):
    """The namespace has no planner ServiceAccount: the chart was not told about it."""


def launch(
    api: KubeApi, rebalance: Mapping[str, Any], *, image: str, bootstrap: Sequence[str]
) -> bool:
    """Start the planner unless its Job exists; True when it was created now.
    ``PlannerAccountMissing`` when the namespace has no ``spindle-planner`` ServiceAccount."""
    namespace = rebalance["metadata"]["namespace"]
    try:
        account = api.get(SERVICEACCOUNTS, namespace, builders.PLANNER_ACCOUNT)
    except KubeError as exc:
        if exc.status != 403:  # not allowed to look: the Job will tell
            raise
        account = {}
    if account is None:
        raise PlannerAccountMissing(
            f"namespace {namespace} has no ServiceAccount {builders.PLANNER_ACCOUNT} for the "
            f"planner: add it to the chart's planner.namespaces (helm upgrade --reuse-values "
            f"--set 'planner.namespaces={{...,{namespace}}}')"
        )
    job = builders.build_planner_job(
        rebalance, image=image, bootstrap=bootstrap, plan_job_file=PLAN_JOB_FILE
    )
    try:
        api.create(JOBS, namespace, job)
    except KubeError as exc:
        if exc.status == 409:
            return False
        raise
    return True


def job_state(api: KubeApi, namespace: str, name: str) -> JobState | None:
    """The planner Job's state; None when it does not exist (any more)."""
    job = api.get(JOBS, namespace, name)
    if job is None:
        return None
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("status") != "True":
            continue
        if cond.get("type") == "Complete":
            return JobState("Succeeded")
        if cond.get("type") == "Failed":
            return JobState("Failed", _pod_message(api, namespace, name) or cond.get("message", ""))
    return JobState("Running")


def _pod_message(api: KubeApi, namespace: str, job: str) -> str:
    """The planner container's termination message (its log's tail when it failed)."""
    for pod in api.list(PODS, namespace, f"job-name={job}"):
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            terminated = (cs.get("state") or {}).get("terminated") or {}
            if terminated.get("message"):
                return str(terminated["message"]).strip()[-1000:]
    return ""


def planner_pods(api: KubeApi, namespace: str, rebalance: str) -> list[str]:
    """Names of the Pods the planner runs (the Job's, Spark's driver and executors)."""
    pods = api.list(PODS, namespace, f"{builders.LABEL_REBALANCE}={rebalance}")
    return sorted(p["metadata"]["name"] for p in pods)


def read_result(api: KubeApi, namespace: str, name: str) -> dict[str, str] | None:
    """The documents the job wrote, or None before it wrote any."""
    configmap = api.get(CONFIGMAPS, namespace, name)
    return None if configmap is None else plan_job.decode(configmap)


def forget(api: KubeApi, namespace: str, rebalance: str) -> None:
    """Remove a plan (Job, ConfigMap, a Spark driver left behind) so that the next one starts
    afresh."""
    name = builders.plan_name(rebalance)
    api.delete(JOBS, namespace, name)
    api.delete(CONFIGMAPS, namespace, name)
    for pod in api.list(PODS, namespace, f"{builders.LABEL_REBALANCE}={rebalance}"):
        api.delete(PODS, namespace, pod["metadata"]["name"])
