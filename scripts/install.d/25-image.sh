#!/usr/bin/env bash
# Spindle's container image (broker, operator, Spark driver and executors), built locally from
# Debian's packages (debootstrap) and PyPI, cached by content hash under $SPINDLE_CACHE/images
# (e2e/controlplane/spindle_image.py says how and why). The node imports it into containerd;
# e2e/kind/up.sh loads the same archive into kind. Needs root (chroot, mounts) and debootstrap,
# which this installs from Debian once. A second run with nothing changed does nothing.
set -euo pipefail
ROOT="${SPINDLE_ROOT:?}"
log() { printf '[25-image] %s\n' "$*" >&2; }

if [[ "$(id -u)" != 0 ]]; then
    log "skipped: building the image needs root (chroot, mounts); the node tests need root too"
    exit 0
fi
if ! command -v debootstrap >/dev/null; then
    log "installing Debian package debootstrap"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q --no-install-recommends debootstrap >/dev/null 2>&1 ||
        { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends debootstrap >/dev/null; }
fi
# -P: the repository's operator/ must not shadow the standard library's operator module.
PYTHONPATH="$ROOT/e2e" "$ROOT/.venv/bin/python" -P -m controlplane.spindle_image >/dev/null
