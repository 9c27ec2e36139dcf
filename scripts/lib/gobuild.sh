# shellcheck shell=bash
# Shared by the installers in scripts/install.d/ that build binaries from pinned Go modules
# (sourced, not run). Each Go module under e2e/controlplane/<name>/ pins its versions in
# go.mod/go.sum; `gobuild` builds it once into $SPINDLE_CACHE/controlplane/<name>-<version>-<hash>/
# and symlinks the binaries into $SPINDLE_CACHE/bin. The hash covers go.mod, go.sum, the wrapper
# sources, the build flags and the Go version, so any change rebuilds and a second run with
# nothing changed does nothing.
#
# The caller sets LOG_TAG (its name in log lines); GO_BUILD_TAGS, when set, is passed as -tags.
ROOT="${SPINDLE_ROOT:?}"
CACHE="${SPINDLE_CACHE:?}"
BIN="$CACHE/bin"
SRC="$ROOT/e2e/controlplane"
mkdir -p "$BIN" "$CACHE/controlplane"

# The pinned go.mod files say which Go they need; never let go fetch another toolchain.
export GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0

log() { printf '[%s] %s\n' "${LOG_TAG:-install}" "$*" >&2; }

# The machine image installs Go under /usr/local/go; a non-login shell may not have it on PATH.
if ! command -v go >/dev/null && [[ -x /usr/local/go/bin/go ]]; then
    PATH="/usr/local/go/bin:$PATH"
fi
command -v go >/dev/null || {
    log "go is required (these binaries are built from Go modules); install Go >= 1.26"
    exit 1
}

# module_version DIR MODULE: the version of MODULE required by DIR/go.mod.
module_version() {
    awk -v m="$2" '$1 == "require" { $1 = ""; $0 = $0 } $1 == m && $2 ~ /^v/ { print $2; exit }' "$1/go.mod"
}

# module_time DIR MODULE VERSION: the release time the module proxy recorded for MODULE@VERSION,
# used as the build date so that the same pinned version always builds the same binary.
module_time() {
    local info
    info="$(cd "$1" && go mod download -json "$2@$3" | sed -n 's/^[[:space:]]*"Info": *"\([^"]*\)".*/\1/p')"
    sed -n 's/.*"Time": *"\([^"]*\)".*/\1/p' "$info" 2>/dev/null | grep . || echo "1970-01-01T00:00:00Z"
}

# gobuild NAME VERSION LDFLAGS OUT=PKG...: build each package PKG of module e2e/controlplane/NAME
# into binary OUT, cached by content hash, then symlink every OUT into $BIN.
gobuild() {
    local name="$1" version="$2" ldflags="$3"
    shift 3
    local dir="$SRC/$name" key dest out pkg spec tags=()
    [[ -n "${GO_BUILD_TAGS:-}" ]] && tags=(-tags "$GO_BUILD_TAGS")
    key="$(
        {
            cat "$dir/go.mod"
            # A module without dependencies has no go.sum.
            cat "$dir/go.sum" 2>/dev/null || true
            find "$dir" -name '*.go' -print0 | sort -z | xargs -0 cat
            printf '%s\n' "$ldflags" "$@"
            [[ -z "${GO_BUILD_TAGS:-}" ]] || printf 'tags=%s\n' "$GO_BUILD_TAGS"
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
                if ! (cd "$dir" && nice -n 10 go build -trimpath "${tags[@]}" -ldflags "$ldflags" \
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
