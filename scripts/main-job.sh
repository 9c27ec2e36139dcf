#!/usr/bin/env bash
# Spindle's main job, run by `./dev run`. Extended issue by issue.
set -euo pipefail
cd "$SPINDLE_ROOT"
exec python -m spindle.broker.storage.demo "$@"
