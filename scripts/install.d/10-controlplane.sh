#!/usr/bin/env bash
# The local Kubernetes control plane's binaries, built from Go modules (never downloaded):
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy, kubectl
# and helm. Each Go module
# under e2e/controlplane/<name>/ pins its versions in go.mod/go.sum; it is built once into
# $SPINDLE_CACHE/controlplane/<name>-<version>-<hash>/ and symlinked into $SPINDLE_CACHE/bin.
# The hash covers go.mod, go.sum, the wrapper sources, the build flags and the Go version, so
# any change rebuilds and a second run with nothing changed does nothing.
#
# Separate modules, not one: etcd's server and Kubernetes share many dependencies (grpc,
# OpenTelemetry, the etcd client) and minimal version selection in a single module would build
# etcd with versions its release was never tested with.
set -euo pipefail
LOG_TAG=10-controlplane
# shellcheck source=../lib/gobuild.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/gobuild.sh"

# etcd: the server's own main (etcdmain.Main) behind a three-line wrapper. Its version string is
# compiled into the module; only the git SHA is a build-time variable.
ETCD_VERSION="$(module_version "$SRC/etcd" go.etcd.io/etcd/server/v3)"
gobuild etcd "$ETCD_VERSION" \
    "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=module-$ETCD_VERSION" \
    etcd=.

# Kubernetes: upstream's own main packages (named as `tool`s in go.mod) built from the wrapper
# module, with the version variables Kubernetes' release build sets (hack/lib/version.sh) so
# that `kubectl version` and /version report the real release. The git commit is not known
# from a module download, so it says where the build came from instead.
KUBE_DIR="$SRC/kubernetes"
KUBE_VERSION="$(module_version "$KUBE_DIR" k8s.io/kubernetes)"
KUBE_MAJOR="${KUBE_VERSION#v}"
KUBE_MAJOR="${KUBE_MAJOR%%.*}"
KUBE_MINOR="${KUBE_VERSION#v*.}"
KUBE_MINOR="${KUBE_MINOR%%.*}"
KUBE_LDFLAGS="-s -w"
for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    KUBE_LDFLAGS+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=$KUBE_MAJOR"
    KUBE_LDFLAGS+=" -X $pkg.gitMinor=$KUBE_MINOR -X $pkg.gitTreeState=clean"
    KUBE_LDFLAGS+=" -X $pkg.gitCommit=go-module-k8s.io/kubernetes@$KUBE_VERSION"
    KUBE_LDFLAGS+=" -X $pkg.buildDate=$(module_time "$KUBE_DIR" k8s.io/kubernetes "$KUBE_VERSION")"
done
gobuild kubernetes "$KUBE_VERSION" "$KUBE_LDFLAGS" \
    kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver \
    kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager \
    kubectl=k8s.io/kubernetes/cmd/kubectl \
    kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler \
    kubelet=k8s.io/kubernetes/cmd/kubelet \
    kube-proxy=k8s.io/kubernetes/cmd/kube-proxy

# helm v3: upstream's cmd/helm with the variables its Makefile sets (but the git commit, unknown
# from a module download: left empty, `helm version --short` prints the bare version); the
# Kubernetes version helm lints and renders against follows its client-go, as in helm's build.
HELM_DIR="$SRC/helm"
HELM_VERSION="$(module_version "$HELM_DIR" helm.sh/helm/v3)"
HELM_CLIENT_GO="$(module_version "$HELM_DIR" k8s.io/client-go)"
HELM_K8S_MAJOR=1 # client-go v0.X.Y is Kubernetes 1.X.Y
HELM_K8S_MINOR="${HELM_CLIENT_GO#v0.}"
HELM_K8S_MINOR="${HELM_K8S_MINOR%%.*}"
HELM_LDFLAGS="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
HELM_LDFLAGS+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
    HELM_LDFLAGS+=" -X $pkg.k8sVersionMajor=$HELM_K8S_MAJOR -X $pkg.k8sVersionMinor=$HELM_K8S_MINOR"
done
gobuild helm "$HELM_VERSION" "$HELM_LDFLAGS" helm=helm.sh/helm/v3/cmd/helm
