"""Helpers of the node tests, bound to the session's cluster and one test's namespace."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml
from controlplane import Binaries, LocalControlPlane, NodeBinaries, images, spindle_image
from controlplane.binaries import default_cache
from controlplane.node import etcd_image

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[2]
RELEASE, SYSTEM = "spindle", "spindle-system"


def install_spindle(
    kube: LocalControlPlane, *values: str, release: str = RELEASE, namespace: str = SYSTEM
) -> str:
    """``helm install`` of charts/spindle as a user would, with Spindle's and etcd's images
    built here and imported into the node (pull policy Never); ``values`` are more ``--set``
    arguments; ``release`` and ``namespace`` the Helm release's. Returns the Spindle image's
    name."""
    layout = kube.node_layout
    assert layout is not None
    image = spindle_image.ensure(ROOT)
    etcd_archive, etcd_name = etcd_image(Binaries.find().etcd, default_cache() / "images")
    for archive in (etcd_archive, image.archive):
        images.import_image(NodeBinaries.find().ctr, layout.containerd_socket, archive)
    repository, tag = etcd_name.rsplit(":", 1)
    sets = [
        f"image.tag={image.name.removeprefix('spindle:')}", "image.pullPolicy=Never",
        f"etcd.image.repository={repository}", f"etcd.image.tag={tag}",
        "etcd.image.pullPolicy=Never", *values,
    ]  # fmt: skip
    kube.helm(
        "install", release, str(ROOT / "charts" / "spindle"), "--namespace", namespace,
        "--create-namespace", *(a for v in sets for a in ("--set", v)),
        "--wait", "--timeout", "5m",
    )  # fmt: skip
    return image.name


class Kit:
    """What node tests do over and over, bound to the session's cluster and a test's namespace."""

    def __init__(self, kube: LocalControlPlane, namespace: str, image: str) -> None:
        self.kube = kube
        self.namespace = namespace
        self.image = image

    @staticmethod
    def wait_for(probe: Callable[[], T | None], *, what: str, timeout: float = 90.0) -> T:
        """Poll ``probe`` until it returns something truthy; fail naming ``what`` otherwise.
        A deadline on waiting, not an assertion about speed."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if result := probe():
                return result
            time.sleep(0.25)
        raise AssertionError(f"timed out waiting for {what}")

    def apply(self, *objects: dict[str, Any]) -> None:
        self.kube.kubectl(
            "apply", "-n", self.namespace, "-f", "-", input=yaml.safe_dump_all(objects)
        )

    def get(self, kind: str, name: str) -> dict[str, Any]:
        out = self.kube.kubectl("get", "-n", self.namespace, kind, name, "-o", "json").stdout
        result: dict[str, Any] = json.loads(out)
        return result

    def phase(self, pod: str) -> str:
        return str(self.get("pod", pod).get("status", {}).get("phase", ""))

    def get_cluster(self, kind: str, name: str) -> dict[str, Any]:
        """A cluster-scoped object (a Node, a PersistentVolume)."""
        result: dict[str, Any] = json.loads(
            self.kube.kubectl("get", kind, name, "-o", "json").stdout
        )
        return result

    def logs(self, pod: str, *, tail: int = -1) -> str:
        return self.kube.kubectl(
            "logs", "-n", self.namespace, pod, f"--tail={tail}", check=False
        ).stdout

    def volume_of(self, claim: str) -> dict[str, Any]:
        """The PersistentVolume bound to ``claim``, once it is bound."""
        name = self.wait_for(
            lambda: self.get("pvc", claim)["spec"].get("volumeName"), what=f"claim {claim} bound"
        )
        return self.get_cluster("pv", name)

    def wait_running(self, pod: str) -> dict[str, Any]:
        self.wait_for(lambda: self.phase(pod) == "Running", what=f"Pod {pod} Running")
        return self.get("pod", pod)

    def pod(
        self,
        name: str,
        script: str,
        *,
        volumes: dict[str, str] | None = None,
        labels: dict[str, str] | None = None,
        user: int = 1000,
    ) -> dict[str, Any]:
        """A Pod running ``script`` under busybox's sh as a non-root user, with each claim of
        ``volumes`` ({mount path: claim}) mounted."""
        paths = sorted(volumes or {})
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": labels or {"app": name}},
            "spec": {
                "terminationGracePeriodSeconds": 1,
                "securityContext": {"runAsUser": user, "runAsGroup": user},
                "containers": [
                    {
                        "name": "main",
                        "image": self.image,
                        "imagePullPolicy": "Never",
                        "command": ["/bin/busybox", "sh", "-c", script],
                        # The image holds busybox alone: /tmp is an emptyDir.
                        "volumeMounts": [
                            {"name": "tmp", "mountPath": "/tmp"},
                            *({"name": f"v{i}", "mountPath": p} for i, p in enumerate(paths)),
                        ],
                    }
                ],
                "volumes": [
                    {"name": "tmp", "emptyDir": {}},
                    *(
                        {
                            "name": f"v{i}",
                            "persistentVolumeClaim": {"claimName": (volumes or {})[p]},
                        }
                        for i, p in enumerate(paths)
                    ),
                ],
            },
        }

    @staticmethod
    def claim(name: str, size: str = "32Mi") -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": name},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": size}},
            },
        }


def pod_ready(kit: Kit, name: str) -> bool:
    """The Pod ``name`` in the kit's namespace exists and is Ready (for a broker: it runs and
    its readiness probe, the Kafka port accepting, passes)."""
    found = kit.kube.kubectl("get", "pod", "-n", kit.namespace, name, "-o", "json", check=False)
    if found.returncode != 0:
        return False
    conditions = json.loads(found.stdout).get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
