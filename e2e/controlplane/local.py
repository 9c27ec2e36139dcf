"""Start and stop a real local Kubernetes cluster: the control plane, and optionally a node.

Why this exists: our machines have no Docker engine, so kind cannot run, yet the operator must
be proven against the real API server (structural schemas, CEL, status subresource, watches,
owner references and garbage collection only behave as the real server makes them behave), and
Spindle's brokers must run as real Pods on real volumes. So etcd, kube-apiserver and
kube-controller-manager, built from their Go modules by ``scripts/install.d/``, are started here
as plain processes:

- certificates from ``pki`` (a fresh CA, serving and client certificates, the service-account key);
- etcd on loopback (free ports, plain HTTP: it never leaves 127.0.0.1);
- kube-apiserver with RBAC, waited for on ``/readyz``;
- kube-controller-manager with its default controllers, waited for until the ``default``
  service account exists, which proves its controllers are really running;
- a self-contained kubeconfig at ``<state dir>/kubeconfig``.

Without a node (``node=False``, what most operator tests use) there is no scheduler and no
kubelet: Pods stay Pending. With ``node=True`` the API server listens on the host's side of the
node's network link instead of loopback, and ``node.LocalNode`` adds the scheduler, containerd,
a kubelet, kube-proxy, CoreDNS and the storage provisioner; ``cleanup`` takes them down.

Processes and their records: ``processes``. Readiness checks: ``readiness``.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

import yaml

from controlplane import cleanup, network, readiness
from controlplane.binaries import Binaries, ControlPlaneError, NodeBinaries, default_cache
from controlplane.network import NodeNetwork
from controlplane.node import LocalNode
from controlplane.node_config import NodeLayout
from controlplane.pki import (
    CLUSTER_DOMAIN,
    LOOPBACK,
    SERVICE_CIDR,
    KeyPair,
    api_server_hosts,
    build_kubeconfig,
    make_ca,
    make_leaf,
    make_service_account_key,
)
from controlplane.processes import (
    Supervisor,
    free_port,
    is_ours,
    read_record,
    read_recorded,
    running_server,
    stop_recorded,
)

ADMIN_USER = "spindle-admin"
_START_ATTEMPTS = 3


class CommandFailed(subprocess.CalledProcessError):
    """kubectl or helm failed; unlike its base class, says what the tool printed on stderr."""

    def __str__(self) -> str:
        return f"{super().__str__()}\n{self.stderr or ''}".rstrip()


@dataclass(frozen=True)
class Ports:
    etcd_client: int
    etcd_peer: int
    api_server: int
    controller_manager: int

    @classmethod
    def pick(cls) -> Ports:
        return cls(free_port(), free_port(), free_port(), free_port())


def etcd_args(binaries: Binaries, state: Path, ports: Ports) -> list[str]:
    """etcd as a single member on loopback. ``--unsafe-no-fsync``: this store lives as long as
    one test session and is thrown away, and fsync on a shared, busy disk slows every write."""
    client = f"http://{LOOPBACK}:{ports.etcd_client}"
    peer = f"http://{LOOPBACK}:{ports.etcd_peer}"
    return [
        str(binaries.etcd),
        "--name=spindle-local",
        f"--data-dir={state / 'etcd'}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=spindle-local={peer}",
        "--initial-cluster-state=new",
        "--unsafe-no-fsync",
        "--log-level=warn",
    ]


def api_server_args(
    binaries: Binaries, state: Path, ports: Ports, *, host: str = LOOPBACK, node: bool = False
) -> list[str]:
    """kube-apiserver with RBAC and client-certificate authentication, listening on ``host``.

    Without a node: ``--endpoint-reconciler-type=none``, since the reconciler would publish the
    advertise address as the ``kubernetes`` Service endpoint and a loopback address is invalid
    there. With a node: the address Pods reach (the host side of the node's link) is published,
    the Node authorizer lets kubelets in, and the API server reaches kubelets by InternalIP with
    a client certificate (else ``kubectl logs/exec`` fail resolving the node's name).
    """
    pki = state / "pki"
    args = [
        str(binaries.kube_apiserver),
        f"--etcd-servers=http://{LOOPBACK}:{ports.etcd_client}",
        f"--bind-address={host}",
        f"--advertise-address={host}",
        f"--secure-port={ports.api_server}",
        f"--tls-cert-file={pki / 'apiserver.crt'}",
        f"--tls-private-key-file={pki / 'apiserver.key'}",
        f"--client-ca-file={pki / 'ca.crt'}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        f"--service-account-issuer=https://kubernetes.default.svc.{CLUSTER_DOMAIN}",
        f"--service-account-key-file={pki / 'sa.pub'}",
        f"--service-account-signing-key-file={pki / 'sa.key'}",
        "--allow-privileged=true",
        f"--cert-dir={pki}",
    ]
    if not node:
        return [*args, "--authorization-mode=RBAC", "--endpoint-reconciler-type=none"]
    return [
        *args,
        "--authorization-mode=Node,RBAC",
        "--enable-admission-plugins=NodeRestriction",
        "--kubelet-preferred-address-types=InternalIP,Hostname",
        f"--kubelet-client-certificate={pki / 'apiserver-kubelet-client.crt'}",
        f"--kubelet-client-key={pki / 'apiserver-kubelet-client.key'}",
        f"--kubelet-certificate-authority={pki / 'ca.crt'}",
    ]


def controller_manager_args(binaries: Binaries, state: Path, ports: Ports) -> list[str]:
    """kube-controller-manager with its default controller set (garbage collector, namespace,
    service account and token controllers among them). No leader election: there is one."""
    pki = state / "pki"
    kubeconfig = state / "kube-controller-manager.kubeconfig"
    return [
        str(binaries.kube_controller_manager),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--bind-address={LOOPBACK}",
        f"--secure-port={ports.controller_manager}",
        f"--tls-cert-file={pki / 'kube-controller-manager.crt'}",
        f"--tls-private-key-file={pki / 'kube-controller-manager.key'}",
        f"--service-account-private-key-file={pki / 'sa.key'}",
        f"--root-ca-file={pki / 'ca.crt'}",
        f"--cluster-signing-cert-file={pki / 'ca.crt'}",
        f"--cluster-signing-key-file={pki / 'ca.key'}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--use-service-account-credentials=true",
        "--leader-elect=false",
        "--controllers=*",
    ]


def issue_certificates(
    *, host: str, node: NodeLayout | None, now: dt.datetime
) -> dict[str, KeyPair]:
    """Every certificate of the cluster by file stem (``ca``, ``apiserver``, ``admin``, one per
    component that talks to the API server). Client users follow Kubernetes' bootstrap RBAC
    (``system:kube-controller-manager``, ``system:kube-scheduler``, ``system:kube-proxy``) and
    the Node authorizer (``system:node:<name>`` in ``system:nodes``)."""
    ca = make_ca(now=now)
    extra_hosts = (host,) if host != LOOPBACK else ()
    pairs = {
        "ca": ca,
        "apiserver": make_leaf(
            ca, common_name="kube-apiserver", server_hosts=api_server_hosts(*extra_hosts), now=now
        ),
        "admin": make_leaf(
            ca, common_name=ADMIN_USER, organization="system:masters", client=True, now=now
        ),
        "kube-controller-manager": make_leaf(
            ca,
            common_name="system:kube-controller-manager",
            server_hosts=(LOOPBACK, "localhost"),
            client=True,
            now=now,
        ),
    }
    if node is not None:
        pairs |= {
            "kube-scheduler": make_leaf(
                ca, common_name="system:kube-scheduler", client=True, now=now
            ),
            "kube-proxy": make_leaf(ca, common_name="system:kube-proxy", client=True, now=now),
            "kubelet": make_leaf(
                ca,
                common_name=f"system:node:{node.name}",
                organization="system:nodes",
                server_hosts=(node.net.node_ip, node.name),
                client=True,
                now=now,
            ),
            "apiserver-kubelet-client": make_leaf(
                ca,
                common_name="kube-apiserver-kubelet-client",
                organization="system:masters",
                client=True,
                now=now,
            ),
        }
    return pairs


class LocalControlPlane:
    """One etcd + kube-apiserver + kube-controller-manager (+ a node), owned by this object.

    ``start()`` returns once the API server is ready and the controller manager runs (and, with
    ``node=True``, the node is Ready with CoreDNS available); ``stop()`` stops every process it
    started and cleans the node up (safe to call twice, and from another process through
    ``stop_recorded_cluster``). Use it as a context manager in scripts.
    """

    def __init__(
        self,
        state_dir: Path,
        *,
        binaries: Binaries | None = None,
        node: bool = False,
        node_binaries: NodeBinaries | None = None,
        ready_timeout: float = 180.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.state_dir = state_dir.resolve()
        self.binaries = binaries or Binaries.find()
        self.node_binaries = (node_binaries or NodeBinaries.find()) if node else None
        self.ready_timeout = ready_timeout
        self._sup = Supervisor(
            self.state_dir, ready_timeout=ready_timeout, clock=clock, sleep=sleep
        )
        self.ports: Ports | None = None
        self.net: NodeNetwork | None = None

    # ---- public surface used by tests and scripts

    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    @property
    def host(self) -> str:
        """The address the API server listens on."""
        return self.net.host_ip if self.net is not None else LOOPBACK

    @property
    def server(self) -> str:
        if self.ports is None:
            raise ControlPlaneError("the control plane has not been started")
        return f"https://{self.host}:{self.ports.api_server}"

    @property
    def node_layout(self) -> NodeLayout | None:
        return NodeLayout(self.state_dir, self.net) if self.net is not None else None

    @property
    def env(self) -> dict[str, str]:
        """Environment for subprocesses: this control plane's kubeconfig, our binaries first."""
        env = dict(os.environ)
        env["KUBECONFIG"] = str(self.kubeconfig)
        env["PATH"] = f"{self.binaries.bin_dir}{os.pathsep}{env.get('PATH', '')}"
        # helm keeps its caches and repository config per user; keep them out of $HOME.
        for var, sub in (
            ("HELM_CACHE_HOME", "cache"),
            ("HELM_CONFIG_HOME", "config"),
            ("HELM_DATA_HOME", "data"),
        ):
            env[var] = str(self.state_dir / "helm" / sub)
        return env

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl against this control plane; raises CommandFailed (a CalledProcessError
        whose message includes stderr) when ``check`` and it fails."""
        return self._run(self.binaries.kubectl, args, input=input, check=check)

    def helm(
        self, *args: str, input: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run helm against this control plane (same contract as ``kubectl``)."""
        return self._run(self.binaries.helm, args, input=input, check=check)

    def apply(self, objects: list[dict[str, object]]) -> None:
        """``kubectl apply`` the objects (server-side, so re-applying is idempotent)."""
        self.kubectl(
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            "-",
            input=yaml.safe_dump_all(objects, sort_keys=False),
        )

    def start(self) -> None:
        """Generate certificates, start etcd, the API server and the controller manager (and the
        node), and wait for each to be ready. On any failure everything started is stopped
        again and ControlPlaneError says which part failed, with the end of its log."""
        if self._sup.procs or running_server(self.state_dir) is not None:
            raise ControlPlaneError(f"a control plane is already running in {self.state_dir}")
        (self.state_dir / "logs").mkdir(parents=True, exist_ok=True)
        # Free ports are picked before the processes bind them, so another process on this
        # machine can take one in between: then start again on new ports, from a fresh store.
        for attempt in range(1, _START_ATTEMPTS + 1):
            try:
                self._start_once()
                return
            except ControlPlaneError as exc:
                if "address already in use" not in str(exc) or attempt == _START_ATTEMPTS:
                    raise
                shutil.rmtree(self.state_dir / "etcd", ignore_errors=True)

    def _start_once(self) -> None:
        self.ports = Ports.pick()
        try:
            if self.node_binaries is not None:
                self.net = network.create()
                self._sup.record_extra["network"] = self.net.to_record()
            self._sup.record_extra["server"] = self.server
            self._write_pki_and_kubeconfigs()
            self._start_control_plane()
            if self.node_binaries is not None:
                self._node().start(self._kubeconfigs(), self.apply)
        except BaseException:
            self.stop()
            raise

    def _start_control_plane(self) -> None:
        assert self.ports is not None
        state, ports, tls = self.state_dir, self.ports, None
        self._sup.spawn("etcd", etcd_args(self.binaries, state, ports))
        self._sup.wait(
            "etcd", lambda: readiness.etcd_healthy(f"http://{LOOPBACK}:{ports.etcd_client}")
        )
        node = self.node_binaries is not None
        self._sup.spawn(
            "kube-apiserver",
            api_server_args(self.binaries, state, ports, host=self.host, node=node),
        )
        tls = readiness.tls_context(state / "pki")
        self._sup.wait("kube-apiserver", lambda: readiness.api_server_ready(self.server, tls))
        self._sup.spawn(
            "kube-controller-manager", controller_manager_args(self.binaries, state, ports)
        )
        health = f"https://{LOOPBACK}:{ports.controller_manager}/healthz"
        self._sup.wait(
            "kube-controller-manager",
            lambda: readiness.controller_manager_ready(health, self.server, tls),
        )

    def _node(self) -> LocalNode:
        assert self.node_binaries is not None
        assert self.net is not None
        return LocalNode(
            supervisor=self._sup,
            binaries=self.node_binaries,
            net=self.net,
            server=self.server,
            pki=self.state_dir / "pki",
            image_cache=default_cache() / "images",
        )

    def stop(self, *, grace: float = 15.0) -> None:
        """Stop every process this cluster started, the node's after draining it; leaves no
        process, mount, cgroup or network namespace behind."""
        procs = list(self._sup.procs.values())
        self._sup.procs.clear()
        stop_recorded_cluster(self.state_dir, grace=grace)
        for proc in procs:  # reap them (stop_recorded_cluster signalled them by pid)
            proc.wait()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def detach(self) -> None:
        """Forget the processes without stopping them (``scripts/controlplane.sh up``): they
        keep running, and ``stop_recorded_cluster`` stops them later from their recorded pids."""
        self._sup.detach()

    # ---- internals

    def _run(
        self, exe: Path, args: tuple[str, ...], *, input: str | None, check: bool
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(exe), *args],
            input=input,
            capture_output=True,
            text=True,
            env=self.env,
            timeout=300,
        )
        if check and done.returncode != 0:
            raise CommandFailed(done.returncode, done.args, done.stdout, done.stderr)
        return done

    def _kubeconfigs(self) -> dict[str, Path]:
        names = ["admin", "kube-controller-manager"]
        if self.net is not None:
            names += ["kube-scheduler", "kube-proxy", "kubelet"]
        return {
            name: self.kubeconfig if name == "admin" else self.state_dir / f"{name}.kubeconfig"
            for name in names
        }

    def _write_pki_and_kubeconfigs(self) -> None:
        pki = self.state_dir / "pki"
        pki.mkdir(parents=True, exist_ok=True)
        pairs = issue_certificates(
            host=self.host, node=self.node_layout, now=dt.datetime.now(dt.UTC)
        )
        for stem, pair in pairs.items():
            for suffix, data in ((".crt", pair.cert), (".key", pair.key)):
                path = pki / f"{stem}{suffix}"
                path.write_bytes(data)
                path.chmod(0o600)
        sa_key, sa_pub = make_service_account_key()
        for name, data in (("sa.key", sa_key), ("sa.pub", sa_pub)):
            (pki / name).write_bytes(data)
            (pki / name).chmod(0o600)
        users = {"admin": ADMIN_USER, "kube-controller-manager": "system:kube-controller-manager"}
        users |= {"kube-scheduler": "system:kube-scheduler", "kube-proxy": "system:kube-proxy"}
        if self.node_layout is not None:
            users["kubelet"] = f"system:node:{self.node_layout.name}"
        for name, path in self._kubeconfigs().items():
            config = build_kubeconfig(
                server=self.server, ca_cert=pairs["ca"].cert, user=users[name], client=pairs[name]
            )
            path.write_text(yaml.safe_dump(config, sort_keys=False))
            path.chmod(0o600)


def stop_recorded_cluster(state_dir: Path, *, grace: float = 15.0) -> list[str]:
    """Stop what was started in ``state_dir`` (from this or another process): the node first,
    drained through the API server while that still answers, then the control plane. Returns
    the names of the processes that were running."""
    state_dir = state_dir.resolve()
    record = read_record(state_dir)
    was_running = [n for n, pid in read_recorded(state_dir).items() if is_ours(pid, state_dir)]
    net = NodeNetwork.from_record(record.get("network"))
    if net is not None:
        layout = NodeLayout(state_dir, net)
        kubectl = _recorded_kubectl(state_dir) if "kube-apiserver" in was_running else None
        cleanup.node_down(layout, NodeBinaries.runc(), kubectl)
    stop_recorded(state_dir, grace=grace)
    return was_running


def _recorded_kubectl(
    state_dir: Path,
) -> Callable[..., subprocess.CompletedProcess[str]] | None:
    try:
        kubectl = Binaries.find().kubectl
    except ControlPlaneError:
        return None

    def run(*args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(kubectl), f"--kubeconfig={state_dir / 'kubeconfig'}", *args],
            capture_output=True,
            text=True,
            timeout=120,
            check=check,
        )

    return run
