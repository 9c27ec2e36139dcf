"""Taking a node down so that nothing of it is left on the machine, in the order that works:

1. stop the scheduler, then delete this node's Pods through the API and wait until the kubelet
   has stopped them (containerd 2.x otherwise keeps one shim per sandbox alive);
2. stop kube-proxy, the kubelet and the provisioner; kill what containers are left through runc
   (its state is under our run dir, so this works after a crash too); stop containerd and then
   its shims (found by the socket address on their command line);
3. unmount everything under the state and run dirs, deepest first (the kubelet's bind mount of
   its root dir, volume mounts, overlay roots, the PV file systems), detach their loop devices,
   and delete containerd's data and the volumes' images (gigabytes);
4. remove the node's cgroups bottom-up, its network namespace and veth, and what upstream writes
   to fixed paths for this node (``/var/lib/cni/results``, ``/var/log/containers`` links).

Every step tolerates finding its part already gone, so ``down`` is idempotent and safe after a
crash; it only ever signals processes whose command line names this node's paths.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from controlplane import network
from controlplane.node import CGROUP_V1
from controlplane.node_config import NodeLayout
from controlplane.processes import pids_naming, stop_pid, stop_recorded

NODE_PROCESSES = ("kube-proxy", "kubelet", "provisioner")

CNI_RESULTS = Path("/var/lib/cni/results")
#: The kubelet's device-plugin socket dir is fixed (k8s.io/kubelet deviceplugin/v1beta1).
DEVICE_PLUGINS = Path("/var/lib/kubelet/device-plugins")
CONTAINER_LOG_LINKS = Path("/var/log/containers")


def node_down(
    layout: NodeLayout, runc: Path, kubectl: Callable[..., subprocess.CompletedProcess[str]] | None
) -> None:
    """Take the node of ``layout`` down (see the module docstring). ``kubectl`` runs against
    the API server when it still answers (None after a crash), to drain the node first."""
    state = layout.state_dir
    stop_recorded(state, names=["kube-scheduler"])
    if kubectl is not None:
        _delete_pods(layout, kubectl)
    stop_recorded(state, names=list(NODE_PROCESSES))
    _kill_containers(layout, runc)
    stop_recorded(state, names=["containerd"])
    for pid in pids_naming(str(layout.containerd_socket), "containerd-shim-runc-v2"):
        stop_pid(pid, str(layout.containerd_socket), grace=5)
    unmount_under(state, layout.run_dir)
    # Images and volumes are gigabytes, and test runs keep their state dirs for a while.
    for bulky in (layout.containerd_dir, state / "volumes"):
        shutil.rmtree(bulky, ignore_errors=True)
    _remove_cgroups(layout.cgroup_root)
    network.delete(layout.net)
    _remove_fixed_paths(layout)


def _delete_pods(
    layout: NodeLayout, kubectl: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    selector = f"spec.nodeName={layout.name}"
    kubectl(
        "delete",
        "pods",
        "--all-namespaces",
        f"--field-selector={selector}",
        "--grace-period=10",
        "--wait=false",
        check=False,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        left = kubectl(
            "get",
            "pods",
            "--all-namespaces",
            f"--field-selector={selector}",
            "-o",
            "name",
            check=False,
        )
        if left.returncode != 0 or not left.stdout.strip():
            return
        time.sleep(0.5)


def _kill_containers(layout: NodeLayout, runc: Path) -> None:
    """Containers the kubelet did not stop (a crash, a drain timeout): kill and delete them."""
    if not layout.runc_root.exists():
        return
    for root in [layout.runc_root, *[p for p in layout.runc_root.iterdir() if p.is_dir()]]:
        listed = subprocess.run(
            [str(runc), f"--root={root}", "list", "-q"], capture_output=True, text=True
        )
        for container in listed.stdout.split():
            subprocess.run(
                [str(runc), f"--root={root}", "kill", container, "KILL"], capture_output=True
            )
            subprocess.run(
                [str(runc), f"--root={root}", "delete", "-f", container], capture_output=True
            )


def _mounts() -> list[str]:
    """Mount points of this mount namespace, in mount order (``/proc/self/mountinfo``, field 5;
    spaces and such are octal-escaped there)."""
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        field = line.split(" ")[4]
        points.append(field.encode().decode("unicode_escape"))
    return points


def unmount_under(*dirs: Path) -> None:
    """Unmount every mount point under ``dirs``, last mounted first (lazily if busy), then
    detach loop devices whose backing file is under them."""
    prefixes = [str(d.resolve()) for d in dirs]

    def ours(point: str) -> bool:
        return any(point == p or point.startswith(p + "/") for p in prefixes)

    for _ in range(5):
        points = [p for p in _mounts() if ours(p)]
        if not points:
            break
        for point in reversed(points):
            if subprocess.run(["umount", point], capture_output=True).returncode != 0:
                subprocess.run(["umount", "-l", point], capture_output=True)
    for backing in Path("/sys/block").glob("loop*/loop/backing_file"):
        with contextlib.suppress(OSError):
            if ours(backing.read_text().strip().removesuffix(" (deleted)")):
                device = f"/dev/{backing.parent.parent.name}"
                subprocess.run(["losetup", "-d", device], capture_output=True)


def _remove_cgroups(cgroup_root: str) -> None:
    for hierarchy in CGROUP_V1.iterdir():
        top = hierarchy / cgroup_root.lstrip("/")
        if not top.is_dir():
            continue
        for directory in sorted(top.rglob("*"), key=lambda p: len(p.parts), reverse=True):
            if directory.is_dir():
                with contextlib.suppress(OSError):
                    directory.rmdir()
        with contextlib.suppress(OSError):
            top.rmdir()


def _remove_fixed_paths(layout: NodeLayout) -> None:
    for result in CNI_RESULTS.glob(f"{layout.network_name}-*"):
        result.unlink(missing_ok=True)
    logs = str(layout.pod_logs_dir)
    if CONTAINER_LOG_LINKS.is_dir():
        for link in CONTAINER_LOG_LINKS.iterdir():
            with contextlib.suppress(OSError):
                if link.is_symlink() and str(link.readlink()).startswith(logs):
                    link.unlink()
    subprocess.run(["rm", "-rf", str(layout.run_dir)], check=False)
    # Every kubelet on the machine shares the device-plugin dir: only the last one out clears it.
    if not _kubelets_running():
        (DEVICE_PLUGINS / "kubelet.sock").unlink(missing_ok=True)
        for directory in (DEVICE_PLUGINS, DEVICE_PLUGINS.parent):
            with contextlib.suppress(OSError):
                directory.rmdir()


def _kubelets_running() -> bool:
    for comm in Path("/proc").glob("[0-9]*/comm"):
        with contextlib.suppress(OSError):
            if comm.read_text().strip() == "kubelet":
                return True
    return False
