"""One Kubernetes node next to the local control plane: kube-scheduler, containerd, a kubelet
registered as a Ready node, kube-proxy, CoreDNS (as a Deployment, like a real cluster's), and
the StorageClass of real per-PV file systems with its provisioner.

The node lives in its own network namespace (``network``); its files under ``<state>/`` and its
sockets under ``/run/spindle-<n>/``; its cgroups under ``/spindle-<n>``. ``cleanup`` undoes all
of it, from this process or after a crash. Every setting this machine kind required is in
``node_config`` with its reason.
"""

from __future__ import annotations

import hashlib
import json
import os
import ssl
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import yaml

from controlplane import addons, images, readiness
from controlplane.binaries import NodeBinaries
from controlplane.network import NodeNetwork
from controlplane.node_config import (
    DNS_SERVICE_INDEX,
    PAUSE_IMAGE,
    NodeLayout,
    cni_config,
    containerd_config,
    kube_proxy_config,
    kubelet_config,
)
from controlplane.pki import CLUSTER_DOMAIN, service_ip
from controlplane.processes import Supervisor, free_port

#: The name cluster DNS must resolve before the node counts as up.
API_NAME = f"kubernetes.default.svc.{CLUSTER_DOMAIN}"
#: The cgroup v1 hierarchies the kubelet (cgroupfs driver) creates Pod cgroups in.
CGROUP_V1 = Path("/sys/fs/cgroup")


def etcd_image(etcd: Path, cache: Path) -> tuple[Path, str]:
    """An image of the control plane's etcd binary (built from etcd's Go module), at the path
    etcd's own release image uses, for the chart's etcd StatefulSet: (archive, name)."""
    name = f"spindle.local/etcd:{_short_hash(etcd)}"
    archive = images.binary_image(
        cache / f"etcd-{_short_hash(etcd)}.tar",
        name=name,
        binary=etcd,
        path="/usr/local/bin/etcd",
        config=images.ImageConfig(entrypoint=["/usr/local/bin/etcd"], user="65532:65532"),
    )
    return archive, name


def cluster_dns_command(layout: NodeLayout, command: list[str]) -> list[str]:
    """``command`` run on the node as a process outside any Pod: in the node's network namespace
    with the cluster's DNS as its resolver (a private mount namespace whose /etc/resolv.conf is
    bind-mounted from the state dir), so a client on the machine reaches Services and the
    brokers' advertised names as a Pod would."""
    resolv = layout.state_dir / "cluster-resolv.conf"
    resolv.write_text(
        f"nameserver {service_ip(DNS_SERVICE_INDEX)}\n"
        f"search svc.{CLUSTER_DOMAIN} {CLUSTER_DOMAIN}\noptions ndots:5\n"
    )
    script = 'mount --bind "$1" /etc/resolv.conf && shift && exec "$@"'
    return [
        *layout.net.nsenter(),
        "unshare",
        "--mount",
        "--propagation=private",
        "--",
        "sh",
        "-c",
        script,
        "sh",
        str(resolv),
        *command,
    ]


def coredns_image_name(coredns: Path) -> str:
    return f"spindle.local/coredns:{_short_hash(coredns)}"


def _short_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]


class LocalNode:
    """Starts the node's processes under a control plane's supervisor (so ``down`` stops them
    with the rest) and waits for each to work. ``server``/``tls`` reach the API server."""

    def __init__(
        self,
        *,
        supervisor: Supervisor,
        binaries: NodeBinaries,
        net: NodeNetwork,
        server: str,
        pki: Path,
        image_cache: Path,
    ) -> None:
        self.sup = supervisor
        self.binaries = binaries
        self.layout = NodeLayout(supervisor.state_dir, net)
        self.server = server
        self.pki = pki
        self.image_cache = image_cache

    @property
    def name(self) -> str:
        return self.layout.name

    def start(
        self, kubeconfigs: dict[str, Path], apply: Callable[[list[addons.Obj]], None]
    ) -> None:
        """Scheduler, containerd (+ pause and CoreDNS images), kubelet until the Node is Ready,
        kube-proxy, the cluster add-ons, the storage provisioner; CoreDNS available last."""
        tls = readiness.tls_context(self.pki)
        self._start_scheduler(kubeconfigs["kube-scheduler"], tls)
        self._start_containerd()
        self._start_kubelet(kubeconfigs["kubelet"], tls)
        self._start_kube_proxy(kubeconfigs["kube-proxy"])
        self._start_provisioner(kubeconfigs["admin"])
        apply(addons.cluster_addons(coredns_image=coredns_image_name(self.binaries.coredns)))
        self.sup.wait(
            "kubelet",
            lambda: readiness.deployment_available(self.server, tls, "kube-system", "coredns"),
            what="CoreDNS (Deployment kube-system/coredns)",
        )
        # Available is not yet reachable: kube-proxy must also have written the Service's rules.
        dns = service_ip(DNS_SERVICE_INDEX)
        self.sup.wait(
            "kube-proxy",
            lambda: self._in_netns_ok(["-m", "controlplane.readiness", "dns", dns, API_NAME]),
            what=f"cluster DNS (resolving {API_NAME} through {dns})",
        )

    def _in_netns(self, args: list[str]) -> list[str]:
        return [*self.layout.net.nsenter(), *args]

    def _start_scheduler(self, kubeconfig: Path, tls: ssl.SSLContext) -> None:
        port = free_port()
        self.sup.spawn(
            "kube-scheduler",
            [
                str(self.binaries.kube_scheduler),
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={self.sup.state_dir / 'pki' / 'kube-scheduler'}",
                "--leader-elect=false",
            ],
        )
        self.sup.wait(
            "kube-scheduler",
            lambda: (
                readiness.http_get(f"https://127.0.0.1:{port}/healthz", tls=_insecure())[0] == 200
            ),
        )

    def _start_containerd(self) -> None:
        layout = self.layout
        layout.run_dir.mkdir(parents=True, exist_ok=True)
        layout.containerd_dir.mkdir(parents=True, exist_ok=True)
        layout.cni_conf_dir.mkdir(parents=True, exist_ok=True)
        config = layout.containerd_dir / "config.toml"
        config.write_text(containerd_config(layout, NodeBinaries.cni_dir()))
        (layout.cni_conf_dir / "10-spindle.conflist").write_text(
            json.dumps(cni_config(layout), indent=2)
        )
        env = dict(os.environ)
        # containerd finds its runc shim, and the shim finds runc, on PATH.
        path = [str(self.binaries.bin_dir), str(NodeBinaries.runc().parent), env.get("PATH", "")]
        env["PATH"] = os.pathsep.join(path)
        self.sup.spawn(
            "containerd",
            self._in_netns([str(self.binaries.containerd), f"--config={config}"]),
            env=env,
        )
        self.sup.wait("containerd", layout.containerd_socket.exists)
        cache = self.image_cache
        pause = images.binary_image(
            cache / f"pause-{_short_hash(self.binaries.pause)}.tar",
            name=PAUSE_IMAGE,
            binary=self.binaries.pause,
            path="/pause",
            config=images.ImageConfig(entrypoint=["/pause"], env=()),
        )
        coredns = images.binary_image(
            cache / f"coredns-{_short_hash(self.binaries.coredns)}.tar",
            name=coredns_image_name(self.binaries.coredns),
            binary=self.binaries.coredns,
            path="/coredns",
            config=images.ImageConfig(entrypoint=["/coredns"], env=(), user="65532:65532"),
        )
        for archive in (pause, coredns):
            images.import_image(self.binaries.ctr, layout.containerd_socket, archive)

    def _start_kubelet(self, kubeconfig: Path, tls: ssl.SSLContext) -> None:
        layout = self.layout
        _make_cgroup_root(layout.cgroup_root)
        layout.kubelet_dir.mkdir(parents=True, exist_ok=True)
        config = layout.kubelet_dir / "config.yaml"
        config.write_text(yaml.safe_dump(kubelet_config(layout, self.pki), sort_keys=False))
        self.sup.spawn(
            "kubelet",
            self._in_netns(
                [
                    str(self.binaries.kubelet),
                    f"--config={config}",
                    f"--kubeconfig={kubeconfig}",
                    f"--root-dir={layout.kubelet_dir}",
                    f"--cert-dir={layout.kubelet_dir / 'pki'}",
                    f"--hostname-override={layout.name}",
                    f"--node-ip={layout.net.node_ip}",
                    "--v=1",
                ]
            ),
        )
        self.sup.wait(
            "kubelet",
            lambda: readiness.node_ready(self.server, tls, layout.name),
            what=f"Node {layout.name} (Ready)",
        )

    def _start_kube_proxy(self, kubeconfig: Path) -> None:
        config = self.sup.state_dir / "kube-proxy.yaml"
        config.write_text(
            yaml.safe_dump(kube_proxy_config(self.layout, kubeconfig), sort_keys=False)
        )
        self.sup.spawn(
            "kube-proxy", self._in_netns([str(self.binaries.kube_proxy), f"--config={config}"])
        )
        # Its health endpoint listens inside the node's namespace.
        url = "http://127.0.0.1:10256/healthz"
        probe = f"import urllib.request as u; u.urlopen({url!r}, timeout=3)"
        self.sup.wait("kube-proxy", lambda: self._in_netns_ok(["-c", probe]))

    def _in_netns_ok(self, python_args: list[str]) -> bool:
        """Whether this Python, run in the node's namespace with ``python_args``, exits 0."""
        env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
        # -P: the repository's operator/ must not shadow the standard library's.
        command = self._in_netns([sys.executable, "-P", *python_args])
        return subprocess.run(command, capture_output=True, env=env, timeout=30).returncode == 0

    def _start_provisioner(self, kubeconfig: Path) -> None:
        volumes = self.sup.state_dir / "volumes"
        volumes.mkdir(exist_ok=True)
        env = dict(os.environ)
        env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
        self.sup.spawn(
            "provisioner",
            [
                sys.executable,
                "-P",
                "-m",
                "controlplane.provisioner",
                f"--kubeconfig={kubeconfig}",
                f"--dir={volumes}",
                f"--node={self.layout.name}",
            ],
            env=env,
        )


def _insecure() -> ssl.SSLContext:
    """For the scheduler's health endpoint, served with a self-signed certificate."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def _make_cgroup_root(cgroup_root: str) -> None:
    """Create the kubelet's cgroupRoot in every v1 hierarchy (it must exist), copying the
    parent's cpus and memory nodes into the cpuset one (an empty cpuset admits no task)."""
    for hierarchy in CGROUP_V1.iterdir():
        if not hierarchy.is_dir() or hierarchy.name == "unified":
            continue
        path = hierarchy / cgroup_root.lstrip("/")
        path.mkdir(exist_ok=True)
        if hierarchy.name == "cpuset":
            for knob in ("cpuset.cpus", "cpuset.mems"):
                (path / knob).write_text((hierarchy / knob).read_text())
