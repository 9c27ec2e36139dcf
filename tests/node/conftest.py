"""Fixtures for tests against a real node: ``node_cluster`` is one control plane plus one node
(scheduler, containerd, kubelet, kube-proxy, CoreDNS, the spindle-local StorageClass) per test
session, started by the first test that asks for it and always taken down at the end, also when
tests fail. ``busybox`` is a small image built here from Debian's busybox-static and imported
into the node's containerd (``imagePullPolicy: Never``: there is no registry)."""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from controlplane import Binaries, ControlPlaneError, LocalControlPlane, NodeBinaries, images
from controlplane.binaries import default_cache

from .kit import Kit

BUSYBOX = Path("/bin/busybox")
BUSYBOX_IMAGE = "spindle.local/busybox:test"


@pytest.fixture(scope="session")
def node_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalControlPlane]:
    if os.geteuid() != 0:
        pytest.skip("a node needs root (mounts, network namespaces, cgroups)")
    try:
        binaries, node_binaries = Binaries.find(), NodeBinaries.find()
    except ControlPlaneError as exc:
        pytest.fail(str(exc), pytrace=False)
    plane = LocalControlPlane(
        tmp_path_factory.mktemp("node"), binaries=binaries, node=True, node_binaries=node_binaries
    )
    try:
        plane.start()  # stops what it started when it fails
        yield plane
    finally:
        plane.stop()


#: Debian's glibc pieces a static busybox loads at run time to resolve names (NSS): without
#: them its wget and nslookup crash resolving anything (static glibc still dlopens NSS).
NSS_FILES = {
    "/lib/x86_64-linux-gnu/libc.so.6": 0o755,
    "/lib/x86_64-linux-gnu/libnss_dns.so.2": 0o644,
    "/lib/x86_64-linux-gnu/libnss_files.so.2": 0o644,
    "/lib/x86_64-linux-gnu/libresolv.so.2": 0o644,
    "/lib64/ld-linux-x86-64.so.2": 0o755,
    "/etc/services": 0o644,
}


@pytest.fixture(scope="session")
def busybox(node_cluster: LocalControlPlane) -> str:
    """The busybox image's name, imported into the node: Debian's static busybox, the glibc
    files it resolves names with, /etc/nsswitch.conf."""
    if not BUSYBOX.exists():
        pytest.fail(f"{BUSYBOX} missing: scripts/install.d/20-node.sh installs busybox-static")
    files = {path: (Path(path).resolve().read_bytes(), mode) for path, mode in NSS_FILES.items()}
    files["/bin/busybox"] = (BUSYBOX.read_bytes(), 0o755)
    files["/etc/nsswitch.conf"] = (b"hosts: files dns\nservices: files\n", 0o644)
    digest = hashlib.sha256(b"".join(content for content, _ in files.values())).hexdigest()
    archive = images.files_image(
        default_cache() / "images" / f"busybox-{digest[:12]}.tar",
        name=BUSYBOX_IMAGE,
        files=files,
        config=images.ImageConfig(entrypoint=["/bin/busybox"]),
    )
    layout = node_cluster.node_layout
    assert layout is not None
    images.import_image(NodeBinaries.find().ctr, layout.containerd_socket, archive)
    return BUSYBOX_IMAGE


@pytest.fixture
def namespace(node_cluster: LocalControlPlane) -> Iterator[str]:
    name = f"node-{uuid.uuid4().hex[:8]}"
    node_cluster.kubectl("create", "namespace", name)
    yield name
    node_cluster.kubectl("delete", "namespace", name, "--wait=false")


@pytest.fixture
def kit(node_cluster: LocalControlPlane, namespace: str, busybox: str) -> Kit:
    return Kit(node_cluster, namespace, busybox)
