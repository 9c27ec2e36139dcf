"""The node's pure builders: what this machine kind requires is in the configs, two nodes on
one machine share nothing, and image archives say what ctr and docker-archive readers need."""

from __future__ import annotations

import hashlib
import json
import tarfile
import tomllib
from pathlib import Path

from controlplane import images
from controlplane.network import NodeNetwork
from controlplane.node_config import (
    NodeLayout,
    containerd_config,
    kube_proxy_config,
    kubelet_config,
)


def layout(index: int) -> NodeLayout:
    return NodeLayout(Path(f"/tmp/state-{index}"), NodeNetwork(index))


def test_two_nodes_share_no_name_address_cgroup_or_socket() -> None:
    a, b = layout(1), layout(2)
    for attribute in ("name", "run_dir", "cgroup_root", "network_name", "containerd_socket"):
        assert getattr(a, attribute) != getattr(b, attribute)
    assert {a.net.node_ip, a.net.host_ip}.isdisjoint({b.net.node_ip, b.net.host_ip})
    assert a.net.pod_cidr != b.net.pod_cidr


def test_containerd_config_has_the_settings_this_vm_requires() -> None:
    node = layout(3)
    config = tomllib.loads(containerd_config(node, Path("/usr/lib/cni")))
    runtime = config["plugins"]["io.containerd.cri.v1.runtime"]
    assert runtime["restrict_oom_score_adj"] is True  # no CAP_SYS_RESOURCE on this VM
    runc = runtime["containerd"]["runtimes"]["runc"]["options"]
    assert runc == {"Root": str(node.runc_root), "SystemdCgroup": False}
    assert config["plugins"]["io.containerd.shim.v1.manager"]["socket_dir"].startswith(
        str(node.run_dir)
    )
    assert config["imports"] == []  # never the host's /etc/containerd


def test_kubelet_runs_on_cgroup_v1_with_cgroupfs_under_its_own_root() -> None:
    config = kubelet_config(layout(4), Path("/pki"))
    assert config["failCgroupV1"] is False
    assert config["cgroupDriver"] == "cgroupfs"
    assert config["cgroupRoot"] == "/spindle-4"
    assert config["readOnlyPort"] == 0
    assert config["authorization"] == {"mode": "Webhook"}


def test_kube_proxy_leaves_conntrack_limits_alone_and_masquerades_services() -> None:
    config = kube_proxy_config(layout(5), Path("/k"))
    assert config["conntrack"] == {"maxPerCore": 0, "min": 0}
    assert config["iptables"] == {"masqueradeAll": True}


def test_image_archive_is_an_oci_layout_and_a_docker_archive(tmp_path: Path) -> None:
    archive = images.files_image(
        tmp_path / "x.tar",
        name="spindle.local/x:1",
        files={"/bin/x": (b"#!/bin/sh\n", 0o755)},
        config=images.ImageConfig(entrypoint=["/bin/x"]),
    )
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
        index = json.load(tar.extractfile("index.json"))  # type: ignore[arg-type]
        docker = json.load(tar.extractfile("manifest.json"))  # type: ignore[arg-type]
        layer_path = docker[0]["Layers"][0]
        layer = tar.extractfile(layer_path).read()  # type: ignore[union-attr]
    assert "oci-layout" in names
    annotations = index["manifests"][0]["annotations"]
    assert annotations["io.containerd.image.name"] == "spindle.local/x:1"
    assert docker[0]["RepoTags"] == ["spindle.local/x:1"]
    assert layer_path == f"blobs/sha256/{hashlib.sha256(layer).hexdigest()}"
