"""The planner's Kubernetes workload for a Rebalance, pure: the Job (Spark in local mode in one
Pod) or the ``spark-submit --master k8s://`` Job (driver and executor Pods from the same
image), and the service account and role binding they run as.

Why a Job in both modes: the Job's Pod is what the operator watches (succeeded or failed, with
its reason), and in ``SparkOnKubernetes`` mode that Pod is ``spark-submit`` in cluster mode with
``waitAppCompletion``, so it ends when the driver ends and fails when the driver fails.
``Job`` (local mode) is the default: a planning run is a minute of work on two cores even for a
million replicas (DESIGN.md §3), and one Pod starts in seconds where a Spark driver plus
executors need their own scheduling; ``SparkOnKubernetes`` is for clusters where one Pod's
memory is not enough.

The Pod gathers its own snapshot from the brokers (Metadata + DescribeLogDirs:
``spindle.operator.workloads.plan_job``) and writes plan and summary into the ConfigMap
``<rebalance>-plan``, so nothing large passes through the operator or the API server's
watch of the Rebalance.

RBAC: the Pods run as ServiceAccount ``spindle-planner`` in the Rebalance's namespace, with a
Role whose rules live in the chart (``charts/spindle/files/planner-rules.yaml``: what
spark-submit and Spark's driver need for the driver and executor Pods, and writing the plan's
ConfigMap). The chart ships account, Role and RoleBinding for each namespace in its
``planner.namespaces``: the operator may not create RoleBindings, since that would let it grant
its own rights onward.

Ownership: the Job is owned by the Rebalance; the Spark driver Pod, which spark-submit creates
(not the Job), is owned by the Rebalance too, through a driver Pod template
(``spark.kubernetes.driver.podTemplateFile``) holding only that owner reference. Spark keeps a
template's metadata (``KubernetesUtils.loadPodFromTemplate`` loads the whole Pod;
``BasicDriverFeatureStep`` edits it, adding name, labels and annotations), and itself makes the
driver the owner of the executor Pods and of the driver's ConfigMap and Service. So deleting a
Rebalance (background deletion, ``kubectl delete``'s default) lets the garbage collector remove
the Job, its Pod, the driver and, through the driver, the executors. The driver's reference
has no ``blockOwnerDeletion``: where the API server enforces it (the
OwnerReferencesPermissionEnforcement admission plugin), setting it needs the right to update
the Rebalance's finalizers, which the planner's account has no reason to hold.

CPU: Spark asks Kubernetes for one core per driver and per executor by default, which a small
node (two cores, brokers on it) cannot schedule. The planner asks for ``planner.resources``'
CPU request when given, else ``DEFAULT_CPU_REQUEST``; a request is not a limit, so a planning
run still uses whatever CPU is free.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from spindle.operator.specs.meta import Obj
from spindle.operator.specs.names import API_VERSION, MANAGED_BY, mount_path

PLANNER_ACCOUNT = "spindle-planner"
LABEL_REBALANCE = "spindle.io/rebalance"
JOB_MODES = ("Job", "SparkOnKubernetes")
PLAN_MODULE = "spindle.operator.workloads.plan_job"
#: A finished planner Job is removed after this long (its ConfigMap stays with the Rebalance).
JOB_TTL_SECONDS = 3600
#: CPU the planner's Pods request when ``planner.resources`` names none (see the docstring).
DEFAULT_CPU_REQUEST = "250m"


#: Where the submitting Pod writes the driver's Pod template (from ``DRIVER_TEMPLATE_ENV``):
#: spark-submit reads the driver template in the submitting process.
DRIVER_TEMPLATE_FILE = "/tmp/spindle-driver-pod.json"
DRIVER_TEMPLATE_ENV = "SPINDLE_DRIVER_POD_TEMPLATE"

#: Writes the driver's Pod template, then runs ``spark-submit "$@"``; when it fails, its output
#: without Java stack frames becomes the Pod's termination message (what the Rebalance's
#: condition shows): otherwise the message is the log's last lines, which for a Java failure
#: are frames of the trace, not its cause.
SUBMIT_SCRIPT = (
    f'printf %s "${DRIVER_TEMPLATE_ENV}" > {DRIVER_TEMPLATE_FILE} || exit 1; '
    'spark-submit "$@" 2>&1 | tee /tmp/spark-submit.log; rc=${PIPESTATUS[0]}; '
    r'if [ "$rc" != 0 ]; then grep -Ev "^[[:space:]]+(at |\.\.\. )" /tmp/spark-submit.log '
    "| tail -c 2000 > /dev/termination-log; fi; exit $rc"
)


def plan_name(rebalance: str) -> str:
    """``<rebalance>-plan``: the Job and the ConfigMap it writes."""
    return f"{rebalance}-plan"


def _owner(rebalance: Mapping[str, Any], *, block: bool = True) -> Obj:
    meta = rebalance["metadata"]
    return {
        "apiVersion": API_VERSION,
        "kind": "Rebalance",
        "name": meta["name"],
        "uid": meta.get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": block,
    }


def build_driver_pod_template(rebalance: Mapping[str, Any]) -> Obj:
    """The Spark driver's Pod template: only the Rebalance as owner (see the module docstring);
    Spark fills in everything else."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"ownerReferences": [_owner(rebalance, block=False)]},
        "spec": {"containers": []},
    }


def _labels(rebalance: Mapping[str, Any]) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "spindle-planner",
        "app.kubernetes.io/managed-by": MANAGED_BY,
        LABEL_REBALANCE: rebalance["metadata"]["name"],
    }


def planner_args(rebalance: Mapping[str, Any], bootstrap: Sequence[str]) -> list[str]:
    """Arguments of ``plan_job``: where the brokers are, what to plan, where to write."""
    meta, spec = rebalance["metadata"], rebalance.get("spec") or {}
    args = [
        "--bootstrap", ",".join(bootstrap),
        "--mode", spec.get("mode") or "full",
        "--namespace", meta["namespace"],
        "--configmap", plan_name(meta["name"]),
        "--capacity-threshold", str(spec.get("capacityThresholdPercent") or 80),
    ]  # fmt: skip
    if spec.get("brokers"):
        args += ["--brokers", ",".join(str(b) for b in spec["brokers"])]
    for v in spec.get("volumes") or []:
        args += ["--dir", f"{v['brokerId']}:{mount_path(int(v['volumeId']))}"]
    return args


def _planner(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    planner: Mapping[str, Any] = spec.get("planner") or {}
    return planner


def build_planner_job(
    rebalance: Mapping[str, Any],
    *,
    image: str,
    bootstrap: Sequence[str],
    plan_job_file: str,
) -> Obj:
    """The planner Job: ``plan_job`` with Spark in local mode, or ``spark-submit`` in cluster
    mode running the same file in a driver Pod with ``executors`` executor Pods.
    ``plan_job_file`` is where ``plan_job.py`` is in the image (spark-submit wants a file)."""
    meta, spec = rebalance["metadata"], rebalance.get("spec") or {}
    planner = _planner(spec)
    mode = planner.get("mode") or "Job"
    name = plan_name(meta["name"])
    args = planner_args(rebalance, bootstrap)
    env: list[Obj] = []
    if mode == "SparkOnKubernetes":
        executors = int(planner.get("executors") or 1)
        labels = _labels(rebalance)
        cpu = str(
            ((planner.get("resources") or {}).get("requests") or {}).get("cpu")
            or DEFAULT_CPU_REQUEST
        )
        conf = {
            "spark.kubernetes.namespace": meta["namespace"],
            "spark.kubernetes.container.image": image,
            "spark.kubernetes.container.image.pullPolicy": "IfNotPresent",
            "spark.kubernetes.authenticate.driver.serviceAccountName": PLANNER_ACCOUNT,
            "spark.kubernetes.driver.request.cores": cpu,
            "spark.kubernetes.executor.request.cores": cpu,
            "spark.kubernetes.submission.waitAppCompletion": "true",
            "spark.kubernetes.driver.podTemplateFile": DRIVER_TEMPLATE_FILE,
            "spark.executor.instances": str(executors),
            "spark.executor.memory": str(planner.get("executorMemory") or "1g"),
            "spark.driver.memory": str(planner.get("driverMemory") or "1g"),
            **{f"spark.kubernetes.driver.label.{k}": v for k, v in labels.items()},
            **{f"spark.kubernetes.executor.label.{k}": v for k, v in labels.items()},
        }
        command = [
            "bash", "-c", SUBMIT_SCRIPT, "spark-submit",
            "--master", "k8s://https://kubernetes.default.svc:443",
            "--deploy-mode", "cluster",
            "--name", name,
            *[item for k, v in conf.items() for item in ("--conf", f"{k}={v}")],
            f"local://{plan_job_file}",
            *args,
        ]  # fmt: skip
        env.append(
            {"name": DRIVER_TEMPLATE_ENV, "value": json.dumps(build_driver_pod_template(rebalance))}
        )
    else:
        command = ["python3", "-P", "-m", PLAN_MODULE, *args, "--master", "local[*]"]
    container: Obj = {
        "name": "planner",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": command,
        "env": [{"name": "PYTHONUNBUFFERED", "value": "1"}, *env],
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    container["resources"] = dict(planner.get("resources") or {})
    container["resources"].setdefault("requests", {"cpu": DEFAULT_CPU_REQUEST})
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": meta["namespace"],
            "labels": _labels(rebalance),
            "ownerReferences": [_owner(rebalance)],
        },
        "spec": {
            "backoffLimit": 0,
            "ttlSecondsAfterFinished": JOB_TTL_SECONDS,
            "template": {
                "metadata": {"labels": _labels(rebalance)},
                "spec": {
                    "restartPolicy": "Never",
                    "serviceAccountName": PLANNER_ACCOUNT,
                    "containers": [container],
                },
            },
        },
    }
