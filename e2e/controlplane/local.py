"""Start and stop a real local Kubernetes control plane on loopback.

Why this exists: our machines have no Docker engine, so kind cannot run, yet the operator must
be proven against the real API server (structural schemas, CEL, status subresource, watches,
owner references and garbage collection only behave as the real server makes them behave).
So etcd, kube-apiserver and kube-controller-manager, built from their Go modules by
``scripts/install.d/10-controlplane.sh``, are started here as plain processes:

- a fresh CA, a serving certificate for the API server, client certificates for an admin in
  ``system:masters`` and for the controller manager (``system:kube-controller-manager``, which
  the API server's bootstrap RBAC policy already authorises), and a service-account signing key;
- etcd on loopback (free ports, plain HTTP: it never leaves 127.0.0.1);
- kube-apiserver with RBAC, waited for on ``/readyz``;
- kube-controller-manager with its default controllers (garbage collector, namespace
  lifecycle, service accounts and their tokens, ...), waited for on ``/healthz`` and until the
  ``default`` service account exists, which proves its controllers are really running;
- a self-contained kubeconfig at ``<state dir>/kubeconfig``.

There is no kubelet and no scheduler: Pods stay Pending, which is what the operator tests expect.

Every process is started in its own session with its output in ``<state dir>/logs``; their pids
are written to ``<state dir>/processes.json`` so another process (``scripts/controlplane.sh
down``) can stop what ``up`` started. A pid is only signalled while its command line still names
the state dir, so a recycled pid is never killed.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import ipaddress
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

#: Service IPs are allocated from here; the API server's own ``kubernetes`` Service takes the
#: first address, which must therefore be in its serving certificate.
SERVICE_CIDR = "10.0.0.0/24"
CLUSTER_DOMAIN = "cluster.local"
ADMIN_USER = "spindle-admin"
_LOOPBACK = "127.0.0.1"
_START_ATTEMPTS = 3


class ControlPlaneError(RuntimeError):
    """The control plane could not be started (the message says which part and why)."""


class CommandFailed(subprocess.CalledProcessError):
    """kubectl or helm failed; unlike its base class, says what the tool printed on stderr."""

    def __str__(self) -> str:
        return f"{super().__str__()}\n{self.stderr or ''}".rstrip()


def default_cache() -> Path:
    """``$SPINDLE_CACHE`` as ``./dev`` sets it, with the same default."""
    return Path(os.environ.get("SPINDLE_CACHE") or Path.home() / ".cache" / "spindle")


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
        """Locate the binaries in ``bin_dir`` (default ``$SPINDLE_CACHE/bin``).

        Raises ControlPlaneError naming every missing one: they come from the installer, never
        from whatever happens to be on PATH (the machine's kubectl is a different version).
        """
        directory = bin_dir or default_cache() / "bin"
        names = {
            "etcd": "etcd",
            "kube_apiserver": "kube-apiserver",
            "kube_controller_manager": "kube-controller-manager",
            "kubectl": "kubectl",
            "helm": "helm",
        }
        paths = {field: directory / exe for field, exe in names.items()}
        missing = [str(p) for p in paths.values() if not os.access(p, os.X_OK)]
        if missing:
            raise ControlPlaneError(
                f"control-plane binaries missing: {', '.join(missing)}; they are built from Go "
                "modules by scripts/install.d/10-controlplane.sh (run ./dev sync)"
            )
        return cls(**paths)

    @property
    def bin_dir(self) -> Path:
        return self.kubectl.parent


# --------------------------------------------------------------------------------------------
# PKI: pure functions returning PEM bytes, so what the certificates contain is testable.


@dataclass(frozen=True)
class KeyPair:
    """A PEM certificate and its PEM private key."""

    cert: bytes
    key: bytes


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attrs)


def _key_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def make_ca(*, now: dt.datetime, days: int = 30) -> KeyPair:
    """A self-signed CA that signs every other certificate of this control plane."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = _name("spindle-local-ca")
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def make_leaf(
    ca: KeyPair,
    *,
    common_name: str,
    organization: str | None = None,
    server_hosts: tuple[str, ...] = (),
    client: bool = False,
    now: dt.datetime,
    days: int = 30,
) -> KeyPair:
    """A certificate signed by ``ca``: a server one when ``server_hosts`` (DNS names or IPs)
    are given, a client one when ``client`` (Kubernetes reads the user from the CN and the
    groups from O), or both."""
    if not server_hosts and not client:
        raise ValueError(f"certificate {common_name!r} must be for a server, a client or both")
    ca_cert = x509.load_pem_x509_certificate(ca.cert)
    ca_key = serialization.load_pem_private_key(ca.key, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA key must be an EC key (as make_ca creates)")
    key = ec.generate_private_key(ec.SECP256R1())
    usages = []
    if server_hosts:
        usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
    if client:
        usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name, organization))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    if server_hosts:
        sans: list[x509.GeneralName] = []
        for host in server_hosts:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                sans.append(x509.DNSName(host))
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def make_service_account_key() -> tuple[bytes, bytes]:
    """(private PEM, public PEM) of the key that signs service-account tokens (RS256)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return _key_pem(key), public


def api_server_hosts() -> tuple[str, ...]:
    """Names the API server is reached by: loopback from here, the in-cluster Service names and
    the ``kubernetes`` Service IP (first address of SERVICE_CIDR) from Pods."""
    service_ip = str(next(ipaddress.ip_network(SERVICE_CIDR).hosts()))
    return (
        _LOOPBACK,
        "localhost",
        service_ip,
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        f"kubernetes.default.svc.{CLUSTER_DOMAIN}",
    )


def build_kubeconfig(
    *, server: str, ca_cert: bytes, user: str, client: KeyPair, context: str = "spindle-local"
) -> dict[str, object]:
    """A self-contained kubeconfig (certificates inlined) for one user against ``server``."""
    import base64

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode("ascii")

    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": context,
                "cluster": {"server": server, "certificate-authority-data": b64(ca_cert)},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": b64(client.cert),
                    "client-key-data": b64(client.key),
                },
            }
        ],
        "contexts": [
            {
                "name": context,
                "context": {"cluster": context, "user": user, "namespace": "default"},
            }
        ],
        "current-context": context,
        "preferences": {},
    }


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((_LOOPBACK, 0))
        return int(sock.getsockname()[1])


# --------------------------------------------------------------------------------------------
# Processes.


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
    client = f"http://{_LOOPBACK}:{ports.etcd_client}"
    peer = f"http://{_LOOPBACK}:{ports.etcd_peer}"
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


def api_server_args(binaries: Binaries, state: Path, ports: Ports) -> list[str]:
    """kube-apiserver with RBAC and client-certificate authentication.

    ``--endpoint-reconciler-type=none``: the reconciler would publish the advertise address as
    the ``kubernetes`` Service endpoint, and a loopback address is invalid there.
    """
    pki = state / "pki"
    return [
        str(binaries.kube_apiserver),
        f"--etcd-servers=http://{_LOOPBACK}:{ports.etcd_client}",
        f"--bind-address={_LOOPBACK}",
        f"--advertise-address={_LOOPBACK}",
        f"--secure-port={ports.api_server}",
        f"--tls-cert-file={pki / 'apiserver.crt'}",
        f"--tls-private-key-file={pki / 'apiserver.key'}",
        f"--client-ca-file={pki / 'ca.crt'}",
        "--authorization-mode=RBAC",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        f"--service-account-issuer=https://kubernetes.default.svc.{CLUSTER_DOMAIN}",
        f"--service-account-key-file={pki / 'sa.pub'}",
        f"--service-account-signing-key-file={pki / 'sa.key'}",
        "--endpoint-reconciler-type=none",
        "--allow-privileged=true",
        f"--cert-dir={pki}",
    ]


def controller_manager_args(binaries: Binaries, state: Path, ports: Ports) -> list[str]:
    """kube-controller-manager with its default controller set (garbage collector, namespace,
    service account and token controllers among them). No leader election: there is one."""
    pki = state / "pki"
    kubeconfig = state / "controller-manager.kubeconfig"
    return [
        str(binaries.kube_controller_manager),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--bind-address={_LOOPBACK}",
        f"--secure-port={ports.controller_manager}",
        f"--tls-cert-file={pki / 'controller-manager.crt'}",
        f"--tls-private-key-file={pki / 'controller-manager.key'}",
        f"--service-account-private-key-file={pki / 'sa.key'}",
        f"--root-ca-file={pki / 'ca.crt'}",
        f"--cluster-signing-cert-file={pki / 'ca.crt'}",
        f"--cluster-signing-key-file={pki / 'ca.key'}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--use-service-account-credentials=true",
        "--leader-elect=false",
        "--controllers=*",
    ]


class LocalControlPlane:
    """One etcd + kube-apiserver + kube-controller-manager, owned by this object.

    ``start()`` returns once the API server is ready and the controller manager runs; ``stop()``
    stops every process it started (safe to call twice, and from another process through
    ``stop_recorded``). Use it as a context manager in scripts.
    """

    def __init__(
        self,
        state_dir: Path,
        *,
        binaries: Binaries | None = None,
        ready_timeout: float = 180.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.state_dir = state_dir.resolve()
        self.binaries = binaries or Binaries.find()
        self.ready_timeout = ready_timeout
        self._clock = clock
        self._sleep = sleep
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self.ports: Ports | None = None

    # ---- public surface used by tests and scripts

    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    @property
    def server(self) -> str:
        if self.ports is None:
            raise ControlPlaneError("the control plane has not been started")
        return f"https://{_LOOPBACK}:{self.ports.api_server}"

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

    def start(self) -> None:
        """Generate certificates, start etcd, the API server and the controller manager, and
        wait for each to be ready. On any failure everything started is stopped again and
        ControlPlaneError says which part failed, with the end of its log."""
        if self._procs or running_server(self.state_dir) is not None:
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
            self._write_pki_and_kubeconfigs()
            self._spawn("etcd", etcd_args(self.binaries, self.state_dir, self.ports))
            self._wait("etcd", self._etcd_healthy)
            self._spawn(
                "kube-apiserver", api_server_args(self.binaries, self.state_dir, self.ports)
            )
            self._wait("kube-apiserver", self._api_server_ready)
            self._spawn(
                "kube-controller-manager",
                controller_manager_args(self.binaries, self.state_dir, self.ports),
            )
            self._wait("kube-controller-manager", self._controller_manager_ready)
        except BaseException:
            self.stop()
            raise

    def stop(self, *, grace: float = 15.0) -> None:
        """Stop every process this control plane started, last started first: SIGTERM, then
        SIGKILL after ``grace`` seconds. Leaves no process behind."""
        for name in reversed(list(self._procs)):
            proc = self._procs.pop(name)
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self._record()
        stop_recorded(self.state_dir, grace=grace)

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
        keep running, and ``stop_recorded`` stops them later from their recorded pids."""
        for proc in self._procs.values():
            # The processes outlive this object on purpose; mark them so Popen does not warn.
            proc.returncode = 0
        self._procs.clear()

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

    def _write_pki_and_kubeconfigs(self) -> None:
        import yaml

        now = dt.datetime.now(dt.UTC)
        pki = self.state_dir / "pki"
        pki.mkdir(parents=True, exist_ok=True)
        ca = make_ca(now=now)
        server = make_leaf(
            ca, common_name="kube-apiserver", server_hosts=api_server_hosts(), now=now
        )
        admin = make_leaf(
            ca, common_name=ADMIN_USER, organization="system:masters", client=True, now=now
        )
        kcm = make_leaf(
            ca,
            common_name="system:kube-controller-manager",
            server_hosts=(_LOOPBACK, "localhost"),
            client=True,
            now=now,
        )
        sa_key, sa_pub = make_service_account_key()
        files = {
            "ca.crt": ca.cert,
            "ca.key": ca.key,
            "apiserver.crt": server.cert,
            "apiserver.key": server.key,
            "admin.crt": admin.cert,
            "admin.key": admin.key,
            "controller-manager.crt": kcm.cert,
            "controller-manager.key": kcm.key,
            "sa.key": sa_key,
            "sa.pub": sa_pub,
        }
        for name, data in files.items():
            path = pki / name
            path.write_bytes(data)
            path.chmod(0o600)
        for path, user, pair in (
            (self.kubeconfig, ADMIN_USER, admin),
            (
                self.state_dir / "controller-manager.kubeconfig",
                "system:kube-controller-manager",
                kcm,
            ),
        ):
            config = build_kubeconfig(server=self.server, ca_cert=ca.cert, user=user, client=pair)
            path.write_text(yaml.safe_dump(config, sort_keys=False))
            path.chmod(0o600)

    def _spawn(self, name: str, args: list[str]) -> None:
        log = self.state_dir / "logs" / f"{name}.log"
        with log.open("ab") as out:
            self._procs[name] = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=self.state_dir,
            )
        self._record()

    def _record(self) -> None:
        """Write the pids of the running processes (read by ``stop_recorded``)."""
        path = self.state_dir / "processes.json"
        # Earlier records count while their process still runs; the ones held here always do (a
        # process that has just been exec'd may not show its new command line in /proc yet).
        live = {
            name: pid
            for name, pid in _read_recorded(self.state_dir).items()
            if _is_ours(pid, self.state_dir)
        }
        live.update({name: proc.pid for name, proc in self._procs.items() if proc.poll() is None})
        if self.ports is not None:
            path.write_text(json.dumps({"pids": live, "server": self.server}, indent=2))

    def _wait(self, name: str, ready: Callable[[], bool]) -> None:
        deadline = self._clock() + self.ready_timeout
        while True:
            proc = self._procs[name]
            if proc.poll() is not None:
                raise ControlPlaneError(
                    f"{name} exited with code {proc.returncode} while starting; end of "
                    f"{self.state_dir / 'logs' / (name + '.log')}:\n{self._log_tail(name)}"
                )
            if ready():
                return
            if self._clock() > deadline:
                raise ControlPlaneError(
                    f"{name} not ready after {self.ready_timeout:.0f} s; end of its log:\n"
                    f"{self._log_tail(name)}"
                )
            self._sleep(0.2)

    def _log_tail(self, name: str, lines: int = 30) -> str:
        path = self.state_dir / "logs" / f"{name}.log"
        try:
            return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
        except OSError as exc:
            return f"(no log: {exc})"

    def _tls(self, *, verify_with_ca: bool = True) -> ssl.SSLContext:
        pki = self.state_dir / "pki"
        context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        context.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
        if not verify_with_ca:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context

    def _get(self, url: str, *, tls: ssl.SSLContext | None = None) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(url, timeout=5, context=tls) as response:
                return int(response.status), bytes(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()
        except (OSError, ssl.SSLError):
            return 0, b""

    def _etcd_healthy(self) -> bool:
        assert self.ports is not None
        status, body = self._get(f"http://{_LOOPBACK}:{self.ports.etcd_client}/health")
        return status == 200 and b'"health":"true"' in body

    def _api_server_ready(self) -> bool:
        status, body = self._get(f"{self.server}/readyz", tls=self._tls())
        return status == 200 and body.strip() == b"ok"

    def _controller_manager_ready(self) -> bool:
        assert self.ports is not None
        status, _ = self._get(
            f"https://{_LOOPBACK}:{self.ports.controller_manager}/healthz", tls=self._tls()
        )
        if status != 200:
            return False
        # The service-account controller creates this in every namespace: once it exists the
        # controllers are running, not merely serving health checks.
        status, _ = self._get(
            f"{self.server}/api/v1/namespaces/default/serviceaccounts/default", tls=self._tls()
        )
        return status == 200


def _read_recorded(state_dir: Path) -> dict[str, int]:
    try:
        data = json.loads((state_dir / "processes.json").read_text())
    except (OSError, ValueError):
        return {}
    pids = data.get("pids", {}) if isinstance(data, dict) else {}
    return {str(k): int(v) for k, v in pids.items()}


def _is_ours(pid: int, state_dir: Path) -> bool:
    """Whether ``pid`` is alive and its command line names ``state_dir`` (all ours do)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    zombie = stat.rsplit(")", 1)[-1].split()[0] == "Z"
    return not zombie and str(state_dir).encode() in cmdline


def stop_process_group(proc: subprocess.Popen[bytes], *, grace: float = 20.0) -> None:
    """Stop a process started with ``start_new_session=True`` and everything it spawned:
    SIGTERM to its group, SIGKILL after ``grace`` seconds. Used for operators run by tests."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def stop_recorded(state_dir: Path, *, grace: float = 15.0) -> list[str]:
    """Stop the processes recorded in ``state_dir/processes.json`` (from this or another
    process), last started first. Returns the names that were running."""
    state_dir = state_dir.resolve()
    recorded = _read_recorded(state_dir)
    stopped = []
    for name, pid in reversed(list(recorded.items())):
        if not _is_ours(pid, state_dir):
            continue
        stopped.append(name)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while _is_ours(pid, state_dir) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _is_ours(pid, state_dir):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            while _is_ours(pid, state_dir):
                time.sleep(0.05)
    with contextlib.suppress(OSError):
        (state_dir / "processes.json").unlink()
    return stopped


def running_server(state_dir: Path) -> str | None:
    """The API server URL of a control plane recorded in ``state_dir`` that is still up."""
    try:
        data = json.loads((state_dir.resolve() / "processes.json").read_text())
    except (OSError, ValueError):
        return None
    pids: Mapping[str, int] = data.get("pids", {})
    if pids and all(_is_ours(int(pid), state_dir.resolve()) for pid in pids.values()):
        return str(data.get("server"))
    return None


def iter_versions(binaries: Binaries) -> Iterator[tuple[str, str]]:
    """(component, version line) for every binary, as each reports itself."""
    commands = {
        "etcd": [str(binaries.etcd), "--version"],
        "kube-apiserver": [str(binaries.kube_apiserver), "--version"],
        "kube-controller-manager": [str(binaries.kube_controller_manager), "--version"],
        "kubectl": [str(binaries.kubectl), "version", "--client"],
        "helm": [str(binaries.helm), "version", "--short"],
    }
    for name, command in commands.items():
        out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
        yield name, out.strip().splitlines()[0]
