"""scripts/controlplane.sh, the Python API and the installer: up/down and a failed start leave
nothing behind; a second install does nothing."""

from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
from pathlib import Path

import pytest
from controlplane import Binaries, ControlPlaneError, LocalControlPlane
from controlplane.binaries import default_cache
from controlplane.local import Ports

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "controlplane.sh"


def processes_naming(text: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if text.encode() in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def run_script(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, SPINDLE_CONTROLPLANE_DIR=str(state))
    return subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=300
    )


def test_script_up_serves_then_down_leaves_no_process(tmp_path: Path) -> None:
    state = tmp_path / "cp"
    try:
        up = run_script(state, "up")
        assert up.returncode == 0, up.stderr
        assert run_script(state, "status").returncode == 0
        env = run_script(state, "env").stdout
        assert f"export KUBECONFIG={state / 'kubeconfig'}" in env
        kubectl = default_cache() / "bin" / "kubectl"
        nodes = subprocess.run(
            [str(kubectl), "--kubeconfig", str(state / "kubeconfig"), "get", "--raw", "/livez"],
            capture_output=True,
            text=True,
            check=True,
        )
        assert nodes.stdout.strip() == "ok"
        assert len(processes_naming(str(state))) == 3
    finally:
        down = run_script(state, "down")
    assert down.returncode == 0, down.stderr
    assert "kube-apiserver" in down.stdout
    assert processes_naming(str(state)) == []
    assert run_script(state, "status").returncode == 3


def test_second_install_run_builds_nothing_and_keeps_the_binaries() -> None:
    bin_dir = default_cache() / "bin"
    before = {name: os.readlink(bin_dir / name) for name in ("etcd", "kube-apiserver", "helm")}
    env = dict(os.environ, SPINDLE_ROOT=str(ROOT), SPINDLE_CACHE=str(default_cache()))
    run = subprocess.run(
        ["bash", str(ROOT / "scripts" / "install.d" / "10-controlplane.sh")],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert "building" not in run.stderr
    assert run.stdout == ""
    assert {name: os.readlink(bin_dir / name) for name in before} == before


def test_failed_start_names_the_failing_part_and_stops_what_already_runs(tmp_path: Path) -> None:
    real = Binaries.find()
    broken = tmp_path / "kube-apiserver"
    broken.write_text("#!/bin/sh\necho 'unknown flag: --no-such-thing' >&2\nexit 3\n")
    broken.chmod(0o755)
    state = tmp_path / "cp"
    plane = LocalControlPlane(state, binaries=dataclasses.replace(real, kube_apiserver=broken))
    with pytest.raises(ControlPlaneError, match=r"kube-apiserver exited with code 3") as failure:
        plane.start()
    assert "unknown flag: --no-such-thing" in str(failure.value)
    # etcd had started and become healthy before the API server failed: it is gone again.
    assert processes_naming(str(state.resolve())) == []


def test_start_moves_to_new_ports_when_one_is_taken_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ports are picked before they are bound; another process may take one in between."""
    real_pick = Ports.pick
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        picks = iter([dataclasses.replace(real_pick(), etcd_client=taken)])
        monkeypatch.setattr(Ports, "pick", staticmethod(lambda: next(picks, None) or real_pick()))
        plane = LocalControlPlane(tmp_path / "cp")
        try:
            plane.start()
            assert plane.ports is not None
            assert plane.ports.etcd_client != taken
            assert plane.kubectl("get", "--raw", "/readyz").stdout.strip() == "ok"
            etcd_log = (tmp_path / "cp" / "logs" / "etcd.log").read_text()
            assert "address already in use" in etcd_log
        finally:
            plane.stop()
    assert processes_naming(str((tmp_path / "cp").resolve())) == []
