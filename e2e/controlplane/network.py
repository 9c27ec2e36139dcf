"""The node's own network namespace, joined to the host by a veth pair.

Why a namespace: kube-proxy owns the iptables chains it writes (``KUBE-*``) and rewrites them
whole, the kubelet listens on fixed ports (10250, 10248), the CNI bridge needs a name and a
subnet, and a node must turn on IP forwarding. Several nodes run on one machine at once (every
engineer's test session, ``./dev run``), and none may touch the host's own network state. So the
node's containerd, kubelet, kube-proxy and Pods live in namespace ``spindle-<n>``:

    host                       | node namespace spindle-<n>
    API server on 10.213.n.1 --+-- veth -- 10.213.n.2 (node IP, kubelet :10250, NodePorts)
    route 10.214.n.0/24 via    |           bridge cni-spn<n> 10.214.n.1 -- Pods 10.214.n.x
          10.213.n.2           |

The host reaches the node IP (NodePorts, the kubelet) and Pod IPs; Pods reach the API server on
the host side of the link (the ``kubernetes`` Service's endpoint). ``n`` is the lowest index whose
namespace does not exist; creating the namespace claims it (``ip netns add`` fails if another
session took it first).
"""

from __future__ import annotations

import contextlib
import ipaddress
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from controlplane.binaries import ControlPlaneError

#: Index range of node networks on one machine.
MAX_NODES = 200
NETNS_DIR = Path("/run/netns")


@dataclass(frozen=True)
class NodeNetwork:
    """Addresses and names of node network number ``index`` (pure data)."""

    index: int

    @property
    def netns(self) -> str:
        return f"spindle-{self.index}"

    @property
    def netns_path(self) -> Path:
        return NETNS_DIR / self.netns

    @property
    def host_veth(self) -> str:
        return f"spn{self.index}-h"

    @property
    def node_veth(self) -> str:
        return f"spn{self.index}-n"

    @property
    def bridge(self) -> str:
        return f"cni-spn{self.index}"

    @property
    def link(self) -> ipaddress.IPv4Network:
        return ipaddress.IPv4Network(f"10.213.{self.index}.0/30")

    @property
    def host_ip(self) -> str:
        """The host's side of the link: the API server binds here."""
        return str(self.link[1])

    @property
    def node_ip(self) -> str:
        """The node's InternalIP: kubelet, NodePorts, hostNetwork Pods."""
        return str(self.link[2])

    @property
    def pod_cidr(self) -> str:
        return f"10.214.{self.index}.0/24"

    def to_record(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_record(cls, data: object) -> NodeNetwork | None:
        if isinstance(data, dict) and isinstance(data.get("index"), int):
            return cls(index=data["index"])
        return None

    def nsenter(self) -> list[str]:
        """Command prefix running a program inside the namespace (nsenter execs it, so the pid
        and the command line are the program's own; only the network namespace changes, never
        the mount namespace the kubelet's volume mounts must be visible in)."""
        return ["nsenter", f"--net={self.netns_path}", "--"]


def _ip(*args: str, netns: NodeNetwork | None = None) -> None:
    command = [*(netns.nsenter() if netns else []), "ip", *args]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise ControlPlaneError(f"{' '.join(command)} failed: {done.stderr.strip()}")


def create() -> NodeNetwork:
    """Claim the lowest free index and set up its namespace, veth pair and routes."""
    for index in range(1, MAX_NODES + 1):
        net = NodeNetwork(index)
        if net.netns_path.exists():
            continue
        claimed = subprocess.run(["ip", "netns", "add", net.netns], capture_output=True)
        if claimed.returncode != 0:
            continue  # another session claimed it between the check and the add
        try:
            _wire(net)
        except BaseException:
            delete(net)
            raise
        return net
    raise ControlPlaneError(f"no free node network: {MAX_NODES} namespaces spindle-* exist")


def _wire(net: NodeNetwork) -> None:
    # A veth left by a crashed session of the same index would make `link add` fail.
    with contextlib.suppress(ControlPlaneError):
        _ip("link", "del", net.host_veth)
    _ip("link", "add", net.host_veth, "type", "veth", "peer", "name", net.node_veth)
    _ip("link", "set", net.node_veth, "netns", net.netns)
    _ip("addr", "add", f"{net.host_ip}/{net.link.prefixlen}", "dev", net.host_veth)
    _ip("link", "set", net.host_veth, "up")
    _ip("route", "add", net.pod_cidr, "via", net.node_ip, "dev", net.host_veth)
    _ip("link", "set", "lo", "up", netns=net)
    _ip("addr", "add", f"{net.node_ip}/{net.link.prefixlen}", "dev", net.node_veth, netns=net)
    _ip("link", "set", net.node_veth, "up", netns=net)
    _ip("route", "add", "default", "via", net.host_ip, netns=net)
    # Forwarding inside the namespace only (Pods <-> node IP <-> host); the host's is untouched.
    sysctl = [*net.nsenter(), "sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward"]
    subprocess.run(sysctl, check=True)


def delete(net: NodeNetwork) -> None:
    """Remove the veth pair (and with it the host route) and the namespace with everything in it
    (the CNI bridge, iptables rules, forwarding). Safe when parts are already gone."""
    with contextlib.suppress(ControlPlaneError):
        _ip("link", "del", net.host_veth)
    if net.netns_path.exists():
        subprocess.run(["ip", "netns", "del", net.netns], capture_output=True)
