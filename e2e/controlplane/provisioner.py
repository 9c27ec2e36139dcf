"""``python -m controlplane.provisioner``: the dynamic provisioner of StorageClass
``spindle-local`` on one node (started by the node, stopped with it).

Why our own: the well-kept provisioners for node-local disks (sig-storage-local-static-
provisioner, Rancher's local-path-provisioner) hand out directories or pre-made disks; none
makes a separate, sized file system per claim, which is what failing one broker disk for real
needs. This one follows the external-provisioner protocol the controller manager expects: for a
claim of our class that the scheduler has placed on our node (``volume.kubernetes.io/
selected-node``, WaitForFirstConsumer), it makes the file system (``volumes.create``) and creates
a ``local`` PV pre-bound to the claim, with node affinity; the PV controller binds them. When a
claim is deleted its PV turns Released, and the provisioner removes the file system and the PV.

It polls the API every half second rather than watching: the lists are small, and polling has no
reconnect logic to get wrong.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path
from typing import Any

from controlplane import volumes
from controlplane.addons import PROVISIONER, STORAGE_CLASS

SELECTED_NODE = "volume.kubernetes.io/selected-node"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
log = logging.getLogger("provisioner")

_UNITS = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
_UNITS |= {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def quantity_bytes(quantity: str) -> int:
    """A Kubernetes storage quantity ("1Gi", "500M", "1073741824") in bytes."""
    for suffix in sorted(_UNITS, key=len, reverse=True):
        if suffix and quantity.endswith(suffix):
            return int(float(quantity[: -len(suffix)]) * _UNITS[suffix])
    return int(float(quantity))


def build_pv(claim: dict[str, Any], *, node: str, path: Path) -> dict[str, Any]:
    """The ``local`` PV for ``claim`` at ``path`` on ``node``, pre-bound to the claim."""
    meta, spec = claim["metadata"], claim["spec"]
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": pv_name(claim),
            "annotations": {PROVISIONED_BY: PROVISIONER},
        },
        "spec": {
            "capacity": {"storage": spec["resources"]["requests"]["storage"]},
            "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
            "volumeMode": "Filesystem",
            "persistentVolumeReclaimPolicy": "Delete",
            "storageClassName": STORAGE_CLASS,
            "local": {"path": str(path), "fsType": "ext4"},
            "claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": meta["namespace"],
                "name": meta["name"],
                "uid": meta["uid"],
            },
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "kubernetes.io/hostname",
                                    "operator": "In",
                                    "values": [node],
                                }
                            ]
                        }
                    ]
                }
            },
        },
    }


def pv_name(claim: dict[str, Any]) -> str:
    """``pvc-<claim uid>``, the name every external provisioner gives."""
    return f"pvc-{claim['metadata']['uid']}"


def wants_volume(claim: dict[str, Any], node: str) -> bool:
    spec, meta = claim.get("spec", {}), claim.get("metadata", {})
    return (
        spec.get("storageClassName") == STORAGE_CLASS
        and not spec.get("volumeName")
        and claim.get("status", {}).get("phase") == "Pending"
        and (meta.get("annotations") or {}).get(SELECTED_NODE) == node
    )


class Provisioner:
    """One pass (``sync``) provisions what is wanted and deletes what was released."""

    def __init__(self, api: Any, volumes_dir: Path, node: str) -> None:
        self.api = api
        self.volumes_dir = volumes_dir
        self.node = node

    def sync(self) -> None:
        claims = self._plain(self.api.list_persistent_volume_claim_for_all_namespaces())
        existing = {
            pv["metadata"]["name"]: pv for pv in self._plain(self.api.list_persistent_volume())
        }
        for claim in claims:
            if wants_volume(claim, self.node) and pv_name(claim) not in existing:
                self._provision(claim)
        for name, pv in existing.items():
            ours = (pv["metadata"].get("annotations") or {}).get(PROVISIONED_BY) == PROVISIONER
            if ours and pv.get("status", {}).get("phase") in ("Released", "Failed"):
                log.info("deleting %s (its claim is gone)", name)
                volumes.remove(self.volumes_dir, name)
                self.api.delete_persistent_volume(name)

    def _plain(self, listed: Any) -> list[dict[str, Any]]:
        """A list's items as the API's JSON (camelCase keys, no None values)."""
        items: list[dict[str, Any]] = self.api.api_client.sanitize_for_serialization(listed)[
            "items"
        ]
        return items

    def _provision(self, claim: dict[str, Any]) -> None:
        name = pv_name(claim)
        size = quantity_bytes(claim["spec"]["resources"]["requests"]["storage"])
        log.info(
            "provisioning %s (%d bytes) for %s/%s",
            name,
            size,
            claim["metadata"]["namespace"],
            claim["metadata"]["name"],
        )
        path = volumes.create(self.volumes_dir, name, size)
        self.api.create_persistent_volume(build_pv(claim, node=self.node, path=path))


def main(argv: list[str] | None = None) -> int:
    from kubernetes import client, config

    parser = argparse.ArgumentParser(prog="provisioner", description=__doc__)
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--dir", type=Path, required=True, help="where volumes are made")
    parser.add_argument("--node", required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    config.load_kube_config(str(args.kubeconfig))  # type: ignore[no-untyped-call]
    provisioner = Provisioner(client.CoreV1Api(), args.dir.resolve(), args.node)
    while True:
        try:
            provisioner.sync()
        except Exception:  # keep serving: the next pass retries
            log.exception("sync failed")
        time.sleep(0.5)


if __name__ == "__main__":
    sys.exit(main())
