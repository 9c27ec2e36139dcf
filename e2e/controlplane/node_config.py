"""Configuration of the node's components as pure builders (text or dicts, no I/O), so the
settings this machine kind requires are written once, with the reason next to each, and tested.

The reasons come from ``NODE_NOTES.md`` (measured on a VM like ours): cgroup v1 only, no
CAP_SYS_RESOURCE, several nodes per machine, nothing written to the host's fixed paths.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from controlplane.network import NodeNetwork
from controlplane.pki import CLUSTER_DOMAIN, service_ip

#: The sandbox image containerd pins (built locally from e2e/controlplane/pause, never pulled).
PAUSE_IMAGE = "spindle.local/pause:1"
#: CoreDNS's Service takes this address of SERVICE_CIDR (the kubelet writes it into resolv.conf).
DNS_SERVICE_INDEX = 10


@dataclass(frozen=True)
class NodeLayout:
    """Every path and name one node uses: its state under the state dir, its sockets under a
    short run dir (unix socket paths are limited to 107 bytes, and the shims' sockets are named
    by a 64-character hash), its cgroups under a root of its own."""

    state_dir: Path
    net: NodeNetwork

    @property
    def name(self) -> str:
        """The Node's name (and hostname override)."""
        return self.net.netns

    @property
    def run_dir(self) -> Path:
        return Path("/run") / self.net.netns

    @property
    def containerd_socket(self) -> Path:
        return self.run_dir / "containerd.sock"

    @property
    def containerd_dir(self) -> Path:
        return self.state_dir / "containerd"

    @property
    def runc_root(self) -> Path:
        return self.run_dir / "runc"

    @property
    def kubelet_dir(self) -> Path:
        return self.state_dir / "kubelet"

    @property
    def cni_conf_dir(self) -> Path:
        return self.state_dir / "cni" / "net.d"

    @property
    def pod_logs_dir(self) -> Path:
        return self.state_dir / "pod-logs"

    @property
    def cgroup_root(self) -> str:
        """The kubelet's ``cgroupRoot``: ``/kubepods`` of two nodes would collide."""
        return f"/{self.net.netns}"

    @property
    def network_name(self) -> str:
        return self.net.bridge


def containerd_config(layout: NodeLayout, cni_bin_dir: Path) -> str:
    """containerd's config (version 3 schema, which 2.x reads) for one node."""
    root = layout.containerd_dir
    run = layout.run_dir
    # Plugins that would write to fixed host paths (/opt/containerd, /var/run/nri) or that need
    # block devices or C code; the node uses overlayfs.
    disabled = [
        "io.containerd.internal.v1.opt",
        "io.containerd.nri.v1.nri",
        "io.containerd.snapshotter.v1.blockfile",
        "io.containerd.snapshotter.v1.devmapper",
        "io.containerd.snapshotter.v1.erofs",
        "io.containerd.snapshotter.v1.zfs",
        "io.containerd.tracing.processor.v1.otlp",
        "io.containerd.internal.v1.tracing",
    ]
    return f"""\
version = 3
root = '{root / "root"}'
state = '{run / "state"}'
imports = []
disabled_plugins = {disabled!r}

[grpc]
  address = '{layout.containerd_socket}'

[ttrpc]
  address = '{layout.containerd_socket}.ttrpc'

[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = '{PAUSE_IMAGE}'

  [plugins.'io.containerd.cri.v1.runtime']
    # This VM withholds CAP_SYS_RESOURCE: without this every sandbox fails with "runc create
    # failed: ... can't get final child's PID from pipe: EOF" (raising oom_score_adj needs it).
    restrict_oom_score_adj = true
    # Pod network namespaces under our state, not /var/run/netns.
    netns_mounts_under_state_dir = true
    enable_cdi = false
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = 'io.containerd.runc.v2'
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          # runc's state (its container list, used by `down` after a crash) under our run dir;
          # cgroupfs, as the kubelet is configured (no systemd here).
          Root = '{layout.runc_root}'
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ['{cni_bin_dir}']
      conf_dir = '{layout.cni_conf_dir}'
      max_conf_num = 1

  [plugins.'io.containerd.grpc.v1.cri']
    stream_server_address = '127.0.0.1'
    stream_server_port = '0'

  [plugins.'io.containerd.shim.v1.manager']
    # Shim sockets here instead of /run/containerd/s, shared by every containerd on the host.
    socket_dir = '{run / "s"}'
"""


def cni_config(layout: NodeLayout) -> dict[str, object]:
    """The Pod network: one bridge with the node's Pod CIDR (host-local IPAM), a route to
    everything through it, and portmap for hostPort. Pods reach the API server and other hosts
    through the node's default route (the veth to the host), which routes the Pod CIDR back."""
    net = layout.net
    return {
        "cniVersion": "1.0.0",
        "name": layout.network_name,
        "plugins": [
            {
                "type": "bridge",
                "bridge": net.bridge,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": net.pod_cidr}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(layout.state_dir / "cni" / "ipam"),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }


def kubelet_config(layout: NodeLayout, pki: Path) -> dict[str, object]:
    """KubeletConfiguration for this machine kind (each non-default setting says why)."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        # The VM has cgroup v1 hierarchies only; 1.36 refuses them unless told not to.
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": layout.cgroup_root,
        # kube-proxy owns iptables; the kubelet's own chains are legacy.
        "makeIPTablesUtilChains": False,
        "failSwapOn": False,
        # The machine's disk and memory are shared and busy; evict only when really short.
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "2%",
            "imagefs.available": "2%",
            "nodefs.inodesFree": "2%",
        },
        "imageGCHighThresholdPercent": 99,
        "imageGCLowThresholdPercent": 98,
        "address": layout.net.node_ip,
        "port": 10250,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": 10248,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(pki / "ca.crt")},
        },
        "authorization": {"mode": "Webhook"},
        "tlsCertFile": str(pki / "kubelet.crt"),
        "tlsPrivateKeyFile": str(pki / "kubelet.key"),
        "clusterDNS": [service_ip(DNS_SERVICE_INDEX)],
        "clusterDomain": CLUSTER_DOMAIN,
        "containerRuntimeEndpoint": f"unix://{layout.containerd_socket}",
        "podLogsDir": str(layout.pod_logs_dir),
        "volumePluginDir": str(layout.kubelet_dir / "volume-plugins"),
        "serializeImagePulls": False,
        "registerNode": True,
        "nodeStatusReportFrequency": "10s",
    }


def kube_proxy_config(layout: NodeLayout, kubeconfig: Path) -> dict[str, object]:
    """kube-proxy in iptables mode inside the node's namespace."""
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "hostnameOverride": layout.name,
        "mode": "iptables",
        "clusterCIDR": layout.net.pod_cidr,
        "bindAddress": layout.net.node_ip,
        "healthzBindAddress": "127.0.0.1:10256",
        "metricsBindAddress": "127.0.0.1:10249",
        # nf_conntrack_max is read-only outside the initial network namespace: leave it alone.
        "conntrack": {"maxPerCore": 0, "min": 0},
        # Pods on one bridge reach each other's Services: masquerading every Service connection
        # sends the reply back through the node (and its conntrack) instead of across the bridge.
        "iptables": {"masqueradeAll": True},
        "nodePortAddresses": [f"{layout.net.node_ip}/32"],
    }
