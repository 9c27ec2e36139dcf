#!/usr/bin/env bash
# Start, stop or inspect the local Kubernetes control plane (etcd, kube-apiserver,
# kube-controller-manager built from Go modules; see e2e/README.md).
#
#   scripts/controlplane.sh up        start it in the background (no-op when already up)
#   scripts/controlplane.sh down      stop every process `up` started
#   scripts/controlplane.sh env       print `export KUBECONFIG=… PATH=…` (eval "$(… env)")
#   scripts/controlplane.sh status    exit 0 when running, 3 when not
#   scripts/controlplane.sh versions  print the version of every binary
#
# State (certificates, etcd data, logs, kubeconfig) lives in $SPINDLE_CONTROLPLANE_DIR,
# default <repo>/.run/controlplane; the kubeconfig is <that dir>/kubeconfig.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export SPINDLE_ROOT="${SPINDLE_ROOT:-$ROOT}"
export SPINDLE_CACHE="${SPINDLE_CACHE:-$HOME/.cache/spindle}"
DIR="${SPINDLE_CONTROLPLANE_DIR:-$ROOT/.run/controlplane}"
PYTHON="$ROOT/.venv/bin/python"
[[ -x "$PYTHON" ]] || PYTHON=python3
cmd="${1:-}"
case "$cmd" in
    up | down | env | status | versions) ;;
    *)
        sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2
        exit 2
        ;;
esac
if [[ "$cmd" == up && ! -x "$SPINDLE_CACHE/bin/kube-apiserver" ]]; then
    SPINDLE_ROOT="$ROOT" bash "$ROOT/scripts/install.d/10-controlplane.sh"
fi
# -P: never put the current directory on sys.path (the repository root has an operator/
# folder that would shadow the standard library module of that name).
PYTHONPATH="$ROOT/e2e${PYTHONPATH:+:$PYTHONPATH}" exec "$PYTHON" -P -m controlplane "$cmd" --dir "$DIR" "${@:2}"
