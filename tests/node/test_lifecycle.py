"""``scripts/controlplane.sh up --node`` and ``down``: down leaves nothing of the node on the
machine (processes, containers, mounts, loop devices, cgroups, network namespace, veth, run
dir), also after every process was killed as in a crash, and a second down is harmless."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from controlplane.binaries import default_cache
from controlplane.network import NodeNetwork
from controlplane.node_config import NodeLayout

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "controlplane.sh"

#: A Pod on a claim of the node's StorageClass, from the pause image every node has.
WORKLOAD = """
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 16Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: sleeper}
spec:
  containers:
    - name: main
      image: spindle.local/pause:1
      imagePullPolicy: Never
      volumeMounts: [{name: data, mountPath: /data}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: data}}]
"""


def run_script(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, SPINDLE_CONTROLPLANE_DIR=str(state))
    return subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=600
    )


def leftovers(layout: NodeLayout) -> dict[str, list[str]]:
    """Everything of this node still on the machine, by kind (empty lists when clean)."""
    marks = (str(layout.state_dir), str(layout.containerd_socket))
    procs = []
    for proc in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            cmdline = proc.read_bytes()
        except OSError:
            continue
        if any(m.encode() in cmdline for m in marks):
            procs.append(cmdline.replace(b"\0", b" ").decode(errors="replace")[:120])
    mountinfo = Path("/proc/self/mountinfo").read_text().splitlines()
    mounts = [
        line.split()[4]
        for line in mountinfo
        if line.split()[4].startswith((str(layout.state_dir), str(layout.run_dir)))
    ]
    loops = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    return {
        "processes": procs,
        "mounts": mounts,
        "loop devices": [line for line in loops.splitlines() if str(layout.state_dir) in line],
        "cgroups": [str(p) for p in Path("/sys/fs/cgroup").glob(f"*{layout.cgroup_root}")],
        "netns": [str(layout.net.netns_path)] if layout.net.netns_path.exists() else [],
        "veth": [layout.net.host_veth]
        if Path(f"/sys/class/net/{layout.net.host_veth}").exists()
        else [],
        "run dir": [str(layout.run_dir)] if layout.run_dir.exists() else [],
    }


@pytest.mark.skipif(os.geteuid() != 0, reason="a node needs root")
def test_down_after_a_crash_leaves_nothing_and_a_second_down_is_harmless(tmp_path: Path) -> None:
    state = (tmp_path / "cluster").resolve()
    up = run_script(state, "up", "--node")
    try:
        assert up.returncode == 0, up.stderr
        assert "node spindle-" in up.stdout
        record = json.loads((state / "processes.json").read_text())
        net = NodeNetwork.from_record(record["network"])
        assert net is not None
        layout = NodeLayout(state, net)
        kubectl = [str(default_cache() / "bin" / "kubectl"), f"--kubeconfig={state / 'kubeconfig'}"]
        subprocess.run(
            [*kubectl, "apply", "-f", "-"],
            input=WORKLOAD,
            text=True,
            check=True,
            capture_output=True,
        )
        subprocess.run(
            [*kubectl, "wait", "--for=condition=Ready", "pod/sleeper", "--timeout=120s"],
            check=True,
            capture_output=True,
        )
        assert leftovers(layout)["mounts"], "the running node has mounts to clean up"
        # A crash: every process `up` started dies at once, containers and shims stay behind.
        for pid in record["pids"].values():
            os.kill(pid, signal.SIGKILL)
    finally:
        down = run_script(state, "down")
    assert down.returncode == 0, down.stderr
    assert leftovers(layout) == {kind: [] for kind in leftovers(layout)}
    again = run_script(state, "down")
    assert again.returncode == 0, again.stderr
    assert "nothing was running" in again.stdout
