#!/usr/bin/env bash
# What the local Kubernetes node runs besides the kubelet and kube-proxy (which 10-controlplane.sh
# builds with the rest of Kubernetes): containerd and its runc shim, a pause image's binary and
# CoreDNS, built from pinned Go modules like the control plane; runc, the CNI plugins and
# iptables from Debian's packages (apt-get, once).
#
# Why these sources: containerd's support table pairs Kubernetes 1.36 with containerd 2.2+, and
# Debian bookworm ships 1.6 (whose CRI v1alpha2 the kubelet dropped), so containerd is built from
# its module, v2.3.x, with CGO off and the btrfs snapshotter left out (it needs C headers). runc
# 1.1 and CNI plugins 1.1 from Debian are what containerd 2.x supports and need no build.
set -euo pipefail
LOG_TAG=20-node
# shellcheck source=../lib/gobuild.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/gobuild.sh"

# Debian packages: runc (the OCI runtime containerd's shim runs), the CNI plugins (bridge,
# host-local, loopback, portmap), iptables (kube-proxy), and busybox-static, whose one static
# binary makes the small image the node's tests run (tests/node).
DEBIAN_PACKAGES=(runc containernetworking-plugins iptables busybox-static)
missing=()
for pkg in "${DEBIAN_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
    if [[ "$(id -u)" != 0 ]]; then
        log "the local node needs Debian packages ${missing[*]}; install them as root (apt-get install ${missing[*]})"
        exit 1
    fi
    log "installing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
        apt-get update -q >/dev/null
        apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
    fi
fi

# containerd, its runc shim and ctr (used to import images), with the version variables its
# Makefile sets. no_btrfs: the btrfs snapshotter needs cgo; the node uses overlayfs/native.
CONTAINERD_VERSION="$(module_version "$SRC/containerd" github.com/containerd/containerd/v2)"
CONTAINERD_LDFLAGS="-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION"
CONTAINERD_LDFLAGS+=" -X github.com/containerd/containerd/v2/version.Package=github.com/containerd/containerd/v2"
CONTAINERD_LDFLAGS+=" -X github.com/containerd/containerd/v2/version.Revision=go-module"
GO_BUILD_TAGS=no_btrfs gobuild containerd "$CONTAINERD_VERSION" "$CONTAINERD_LDFLAGS" \
    containerd=github.com/containerd/containerd/v2/cmd/containerd \
    containerd-shim-runc-v2=github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
    ctr=github.com/containerd/containerd/v2/cmd/ctr

# The sandbox image's only binary (e2e/controlplane/pause/main.go); the node packs it into the
# image it pins as containerd's sandbox image.
gobuild pause v1 "-s -w" pause=.

# CoreDNS with the plugins cluster DNS uses (e2e/controlplane/coredns/main.go); it runs in a Pod
# from an image holding only this binary.
COREDNS_VERSION="$(module_version "$SRC/coredns" github.com/coredns/coredns)"
gobuild coredns "$COREDNS_VERSION" \
    "-s -w -X github.com/coredns/coredns/coremain.GitCommit=go-module-$COREDNS_VERSION" \
    coredns=.
