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
            for spec in "$@"; do
                out="${spec%%=*}"
                pkg="${spec#*=}"
                (cd "$dir" && nice -n 10 go build -trimpath -ldflags "$ldflags" -o "$dest.tmp/$out" "$pkg")
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
