"""The roller: the one reconcile step that deletes (restarts) a broker's Pod.

Two callers ask it, both inside a Broker's reconcile: ``reconcile.broker.apply_pod`` (the
Pod the builder makes differs from the running one: ``roll_pod``) and the remediation step
(``reconcile.remediation``: a ReplaceVolume / restart-pod action restarts the very Pod its
record names: ``restart_pod``). Nothing else in the operator deletes a broker Pod
(``kube.apply`` refuses Pods); the planner Job's Pods (``workloads.planner``) are not brokers.

The rule is the pure ``spindle.operator.decisions.roll``; this module only reads the running
Pod and carries the decision out. The cluster-wide rule (one broker of a cluster at a time, no
restart that would take a partition below ``min.insync.replicas`` -- issue #39) is added here
and there: this step would read the cluster's other Broker Pods and Metadata (through
``spindle.operator.brokers``) into the decision's facts, and a held-back restart is a
``wait`` that the next reconcile retries.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spindle.operator.decisions.roll import decide_roll
from spindle.operator.kube import PODS, KubeApi, KubeError, Outcome


def roll_pod(api: KubeApi, desired: Mapping[str, Any]) -> Outcome:
    """Create the broker's Pod, leave it, or delete it for replacement (``decide_roll``)."""
    namespace, name = desired["metadata"]["namespace"], desired["metadata"]["name"]
    live = api.get(PODS, namespace, name)
    decision = decide_roll(desired, live)
    if decision.action == "create":
        try:
            api.create(PODS, namespace, dict(desired))
        except KubeError as exc:
            if exc.status != 409:
                raise
            # Created concurrently (a resume and a timer); decide against that one.
            live = api.get(PODS, namespace, name)
            if live is None:
                raise
            decision = decide_roll(desired, live)
        else:
            return Outcome("Created", "Pod", name)
    if decision.action == "replace":
        api.delete(PODS, namespace, name)
        return Outcome("Replaced", "Pod", name, decision.reason)
    return Outcome("Unchanged", "Pod", name, decision.reason)


def restart_pod(api: KubeApi, namespace: str, name: str, uid: str) -> bool:
    """Delete the broker Pod ``name`` only if it is still the one with ``uid`` (a remediation
    record names the Pod it restarts, so a Pod made since is never touched); False when it is
    gone or is another one."""
    body = {
        "kind": "DeleteOptions",
        "apiVersion": "v1",
        "propagationPolicy": "Background",
        "preconditions": {"uid": uid},
    }
    try:
        api.request("DELETE", PODS.path(namespace, name), body=body)
    except KubeError as exc:
        if exc.status in (404, 409):  # gone, or a newer object of that name: not ours
            return False
        raise
    return True
