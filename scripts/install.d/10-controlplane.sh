#!/usr/bin/env bash
# The local Kubernetes control plane's binaries, built from Go modules (never downloaded):
# etcd, and later kube-apiserver, kube-controller-manager, kubectl and helm. Each Go module
# under e2e/controlplane/<name>/ pins its versions in go.mod/go.sum; it is built once into
# $SPINDLE_CACHE/controlplane/<name>-<version>-<hash>/ and symlinked into $SPINDLE_CACHE/bin.
# The hash covers go.mod, go.sum, the wrapper sources, the build flags and the Go version, so
# any change rebuilds and a second run with nothing changed does nothing.
#
# Separate modules, not one: etcd's server and Kubernetes share many dependencies (grpc,
# OpenTelemetry, the etcd client) and minimal version selection in a single module would build
# etcd with versions its release was never tested with.
set -euo pipefail
ROOT="${SPINDLE_ROOT:?}"
CACHE="${SPINDLE_CACHE:?}"
BIN="$CACHE/bin"
SRC="$ROOT/e2e/controlplane"
mkdir -p "$BIN" "$CACHE/controlplane"

# The pinned go.mod files say which Go they need; never let go fetch another toolchain.
export GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0

log() { printf '[10-controlplane] %s\n' "$*" >&2; }

# The machine image installs Go under /usr/local/go; a non-login shell may not have it on PATH.
if ! command -v go >/dev/null && [[ -x /usr/local/go/bin/go ]]; then
    PATH="/usr/local/go/bin:$PATH"
fi
command -v go >/dev/null || {
    log "go is required (the control plane is built from Go modules); install Go >= 1.26"
    exit 1
}

# module_version DIR MODULE: the version of MODULE required by DIR/go.mod.
module_version() {
    awk -v m="$2" '$1 == "require" { $1 = ""; $0 = $0 } $1 == m && $2 ~ /^v/ { print $2; exit }' "$1/go.mod"
}

# build NAME VERSION LDFLAGS OUT=PKG...: build each package PKG of module e2e/controlplane/NAME
# into binary OUT, cached by content hash, then symlink every OUT into $BIN.
build() {
    local name="$1" version="$2" ldflags="$3"
    shift 3
    local dir="$SRC/$name" key dest out pkg spec
    key="$(
        {
            cat "$dir/go.mod" "$dir/go.sum"
            find "$dir" -name '*.go' -print0 | sort -z | xargs -0 cat
            printf '%s\n' "$ldflags" "$@"
            go env GOVERSION GOOS GOARCH
        } | sha256sum | cut -c1-12
    )"
    dest="$CACHE/controlplane/$name-$version-$key"
    if [[ ! -e "$dest/.complete" ]]; then
        # Several shells may run ./dev sync at once: one builds, the others wait for it.
        exec 9>"$CACHE/controlplane/.$name.lock"
        flock 9
        if [[ ! -e "$dest/.complete" ]]; then
            log "building $name $version from Go modules (once per version; this takes a while)"
            local started=$SECONDS
            rm -rf "$dest.tmp"
            mkdir -p "$dest.tmp"
            # go prints a line per module it downloads: keep that in a log, show it on failure.
            local build_log="$CACHE/controlplane/$name-build.log"
            : >"$build_log"
            for spec in "$@"; do
                out="${spec%%=*}"
                pkg="${spec#*=}"
                if ! (cd "$dir" && nice -n 10 go build -trimpath -ldflags "$ldflags" \
                    -o "$dest.tmp/$out" "$pkg") >>"$build_log" 2>&1; then
                    log "building $out failed; end of $build_log:"
                    tail -n 40 "$build_log" >&2
                    exit 1
                fi
            done
            rm -rf "$dest"
            mv "$dest.tmp" "$dest"
            touch "$dest/.complete"
            log "built $name $version in $((SECONDS - started)) s"
        fi
        exec 9>&-
    fi
    for spec in "$@"; do
        out="${spec%%=*}"
        if [[ "$(readlink "$BIN/$out" 2>/dev/null)" != "$dest/$out" ]]; then
            ln -sfn "$dest/$out" "$BIN/$out"
        fi
    done
}

# etcd: the server's own main (etcdmain.Main) behind a three-line wrapper. Its version string is
# compiled into the module; only the git SHA is a build-time variable.
ETCD_VERSION="$(module_version "$SRC/etcd" go.etcd.io/etcd/server/v3)"
build etcd "$ETCD_VERSION" \
    "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=module-$ETCD_VERSION" \
    etcd=.

# module_time DIR MODULE VERSION: the release time the module proxy recorded for MODULE@VERSION,
# used as the build date so that the same pinned version always builds the same binary.
module_time() {
    local info
    info="$(cd "$1" && go mod download -json "$2@$3" | sed -n 's/^[[:space:]]*"Info": *"\([^"]*\)".*/\1/p')"
    sed -n 's/.*"Time": *"\([^"]*\)".*/\1/p' "$info" 2>/dev/null | grep . || echo "1970-01-01T00:00:00Z"
}

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
build kubernetes "$KUBE_VERSION" "$KUBE_LDFLAGS" \
    kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver \
    kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager \
    kubectl=k8s.io/kubernetes/cmd/kubectl

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
build helm "$HELM_VERSION" "$HELM_LDFLAGS" helm=helm.sh/helm/v3/cmd/helm
