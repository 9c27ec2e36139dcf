"""Where the cluster's executables are: built from Go modules into ``$SPINDLE_CACHE/bin`` by
``scripts/install.d/`` (never whatever happens to be on PATH: the machine's kubectl is another
version), plus runc and the CNI plugins from Debian's packages."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, fields
from pathlib import Path


class ControlPlaneError(RuntimeError):
    """The cluster could not be started or stopped (the message says which part and why)."""


def default_cache() -> Path:
    """``$SPINDLE_CACHE`` as ``./dev`` sets it, with the same default."""
    return Path(os.environ.get("SPINDLE_CACHE") or Path.home() / ".cache" / "spindle")


def _find(cls: type, directory: Path, installer: str) -> dict[str, Path]:
    paths = {f.name: directory / f.name.replace("_", "-") for f in fields(cls)}
    missing = [str(p) for p in paths.values() if not os.access(p, os.X_OK)]
    if missing:
        raise ControlPlaneError(
            f"binaries missing: {', '.join(missing)}; they are built from Go modules by "
            f"{installer} (run ./dev sync)"
        )
    return paths


@dataclass(frozen=True)
class Binaries:
    """Paths of the executables the control plane runs (all built from Go modules)."""

    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path
    kubectl: Path
    helm: Path

    @classmethod
    def find(cls, bin_dir: Path | None = None) -> Binaries:
        """Locate the binaries in ``bin_dir`` (default ``$SPINDLE_CACHE/bin``); raises
        ControlPlaneError naming every missing one."""
        directory = bin_dir or default_cache() / "bin"
        return cls(**_find(cls, directory, "scripts/install.d/10-controlplane.sh"))

    @property
    def bin_dir(self) -> Path:
        return self.kubectl.parent


@dataclass(frozen=True)
class NodeBinaries:
    """What a node adds: the scheduler (a control-plane part only a node needs), the kubelet,
    kube-proxy, containerd with its runc shim and ctr, the pause binary and CoreDNS (all built
    from Go modules), runc and the CNI plugins (Debian's)."""

    kube_scheduler: Path
    kubelet: Path
    kube_proxy: Path
    containerd: Path
    containerd_shim_runc_v2: Path
    ctr: Path
    pause: Path
    coredns: Path

    @classmethod
    def find(cls, bin_dir: Path | None = None) -> NodeBinaries:
        directory = bin_dir or default_cache() / "bin"
        found = _find(cls, directory, "scripts/install.d/10-controlplane.sh and 20-node.sh")
        missing = [p for p in (cls.runc(), cls.cni_dir() / "bridge") if not os.access(p, os.X_OK)]
        if missing:
            raise ControlPlaneError(
                f"missing {', '.join(map(str, missing))}: Debian's runc and "
                "containernetworking-plugins, installed by scripts/install.d/20-node.sh"
            )
        return cls(**found)

    @staticmethod
    def runc() -> Path:
        return Path(shutil.which("runc") or "/usr/sbin/runc")

    @staticmethod
    def cni_dir() -> Path:
        """Where Debian's containernetworking-plugins puts the plugins."""
        return Path("/usr/lib/cni")

    @property
    def bin_dir(self) -> Path:
        return self.kubelet.parent


def iter_versions(
    binaries: Binaries, node: NodeBinaries | None = None
) -> Iterator[tuple[str, str]]:
    """(component, version line) for every binary, as each reports itself."""
    commands = {
        "etcd": [str(binaries.etcd), "--version"],
        "kube-apiserver": [str(binaries.kube_apiserver), "--version"],
        "kube-controller-manager": [str(binaries.kube_controller_manager), "--version"],
        "kubectl": [str(binaries.kubectl), "version", "--client"],
        "helm": [str(binaries.helm), "version", "--short"],
    }
    if node is not None:
        commands |= {
            "kube-scheduler": [str(node.kube_scheduler), "--version"],
            "kubelet": [str(node.kubelet), "--version"],
            "kube-proxy": [str(node.kube_proxy), "--version"],
            "containerd": [str(node.containerd), "--version"],
            "runc": [str(node.runc()), "--version"],
            "coredns": [str(node.coredns), "-version"],
        }
    for name, command in commands.items():
        out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
        yield name, out.strip().splitlines()[0]
