"""The spindle-local StorageClass: every claim gets its own ext4 file system of the claimed size,
a Pod writes to it, and failing one volume for real makes the Pod's writes to that volume fail
with the errno a broker would see, while its other volumes keep working."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from controlplane import LocalControlPlane, volumes
from controlplane.volumes import Failure

from .kit import Kit

#: Writes a new file on each volume every 0.2 s, logging "<volume> ok <n>" or "<volume> failed:"
#: and the shell's error, which ends in strerror(errno) ("sh: can't create /v/f.3: Read-only
#: file system" when the open fails, "sh: write error: No space left on device" when the write).
WRITER = (
    "i=0; while true; do i=$((i+1)); for v in {dirs}; do "
    'if err=$( {{ echo data > $v/f.$i; }} 2>&1 ); then echo "$v ok $i"; '
    'else echo "$v failed: $err"; fi; done; sleep 0.2; done'
)


def test_claim_binds_to_its_own_sized_file_system_and_a_pod_writes_to_it(kit: Kit) -> None:
    kit.apply(
        kit.claim("data", "48Mi"),
        kit.pod("writer", "echo written > /data/hello; sleep 3600", volumes={"/data": "data"}),
    )
    kit.wait_running("writer")
    spec = kit.volume_of("data")["spec"]
    path = Path(spec["local"]["path"])
    assert spec["storageClassName"] == "spindle-local"
    # Its own mount (ext4 on a loop device): 48 MiB less ext4's journal and metadata.
    assert os.path.ismount(path)
    assert os.stat(path).st_dev != os.stat("/").st_dev
    fs = os.statvfs(path)
    assert 36 * 2**20 < fs.f_blocks * fs.f_frsize <= 48 * 2**20
    kit.wait_for(lambda: (path / "hello").exists(), what="the Pod's file on the volume")
    assert (path / "hello").read_text() == "written\n"


def test_deleting_the_claim_removes_its_file_system_and_volume(kit: Kit) -> None:
    kit.apply(kit.claim("gone"), kit.pod("user", "sleep 3600", volumes={"/d": "gone"}))
    kit.wait_running("user")
    pv = kit.volume_of("gone")
    name, path = pv["metadata"]["name"], Path(pv["spec"]["local"]["path"])
    image = volumes.image_path(path.parent, name)
    assert image.exists()
    kit.kube.kubectl("delete", "-n", kit.namespace, "pod/user", "pvc/gone", "--wait=true")
    kit.wait_for(
        lambda: kit.kube.kubectl("get", "pv", name, check=False).returncode != 0,
        what=f"PV {name} deleted",
    )
    assert not os.path.ismount(path)
    assert not path.exists()
    assert not image.exists()


@dataclass
class Jbod:
    kit: Kit
    pvs: dict[str, str]  # mount path in the Pod -> PV name


@pytest.fixture(scope="module")
def jbod(node_cluster: LocalControlPlane, busybox: str) -> Iterator[Jbod]:
    """One Pod with four volumes (one per kind of failure) writing to all of them."""
    namespace = f"jbod-{uuid.uuid4().hex[:6]}"
    node_cluster.kubectl("create", "namespace", namespace)
    kit = Kit(node_cluster, namespace, busybox)
    mounts = {f"/{f.name.lower()}": f"vol-{f.name.lower().replace('_', '-')}" for f in Failure}
    kit.apply(
        *(kit.claim(c) for c in mounts.values()),
        kit.pod("broker", WRITER.format(dirs=" ".join(sorted(mounts))), volumes=mounts),
    )
    kit.wait_running("broker")
    yield Jbod(kit, {path: kit.volume_of(c)["metadata"]["name"] for path, c in mounts.items()})
    node_cluster.kubectl("delete", "namespace", namespace, "--wait=false")


@pytest.mark.parametrize("failure", list(Failure), ids=[f.value for f in Failure])
def test_failed_volume_makes_writes_fail_with_its_errno_and_spares_the_others(
    jbod: Jbod, failure: Failure
) -> None:
    kit, path = jbod.kit, f"/{failure.name.lower()}"
    volumes_dir = kit.kube.state_dir / "volumes"
    message = os.strerror(failure.errno)  # EROFS, ENOSPC, EACCES, EIO
    volumes.fail(volumes_dir, jbod.pvs[path], failure)
    try:
        kit.wait_for(
            lambda: any(
                line.startswith(f"{path} failed: ") and line.endswith(message)
                for line in kit.logs("broker", tail=40).splitlines()
            ),
            what=f"writes to {path} failing with {message!r}",
        )
        # The Pod's other volumes still take new files after this one failed.
        others = [p for p in jbod.pvs if p != path]
        kit.wait_for(
            lambda: all(f"{p} ok" in kit.logs("broker", tail=20) for p in others),
            what="the other volumes to keep working",
        )
    finally:
        if failure is not Failure.IO_ERROR:
            volumes.restore(volumes_dir, jbod.pvs[path], failure)
    if failure is not Failure.IO_ERROR:
        kit.wait_for(lambda: f"{path} ok" in kit.logs("broker", tail=20), what=f"{path} restored")


def test_failing_a_volume_that_is_not_mounted_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="not mounted"):
        volumes.fail(tmp_path, "pvc-nope", Failure.FULL)


def test_a_shut_down_volume_cannot_be_restored_in_place(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot be restored"):
        volumes.restore(tmp_path, "pvc-x", Failure.IO_ERROR)
