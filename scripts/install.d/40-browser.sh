#!/usr/bin/env bash
# The dashboard's browser tests (tests/dashboard): Debian's chromium, driven by the Python
# `playwright` package (a dev dependency in pyproject.toml; its wheel carries its own driver,
# and the tests pass chromium's path, so no browser is ever downloaded), plus axe-core from the
# npm registry at a pinned version for the accessibility check, cached under $SPINDLE_CACHE.
# npm's playwright-core is not needed: the Python package already speaks to the browser.
# Idempotent: a second run installs nothing.
set -euo pipefail
CACHE="${SPINDLE_CACHE:?}"
AXE_VERSION=4.14.1
AXE_DIR="$CACHE/npm/axe-core-$AXE_VERSION"

if ! command -v chromium >/dev/null; then
    echo "[40-browser] installing Debian's chromium" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

if [[ ! -s "$AXE_DIR/node_modules/axe-core/axe.min.js" ]]; then
    echo "[40-browser] installing axe-core $AXE_VERSION from the npm registry" >&2
    if ! command -v npm >/dev/null; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null
    fi
    rm -rf "$AXE_DIR.tmp"
    mkdir -p "$AXE_DIR.tmp"
    # --ignore-scripts: nothing runs at install time; axe-core is one prebuilt JavaScript file.
    npm install --prefix "$AXE_DIR.tmp" --no-audit --no-fund --ignore-scripts --silent \
        "axe-core@$AXE_VERSION" >/dev/null
    rm -rf "$AXE_DIR"
    mv "$AXE_DIR.tmp" "$AXE_DIR"
fi
