#!/usr/bin/env bash
# Start, stop or inspect the local Kubernetes cluster (etcd, kube-apiserver,
# kube-controller-manager, and with --node a node: kube-scheduler, containerd, kubelet,
# kube-proxy, CoreDNS, StorageClass spindle-local; all built from Go modules, see e2e/README.md).
#
#   scripts/controlplane.sh up [--node]   start it in the background (no-op when already up)
#   scripts/controlplane.sh down          stop everything `up` started, clean the node up
#   scripts/controlplane.sh env           print `export KUBECONFIG=… PATH=…` (eval "$(… env)")
#   scripts/controlplane.sh status        exit 0 when running, 3 when not
#   scripts/controlplane.sh versions [--node]  print the version of every binary
#   scripts/controlplane.sh import-image ARCHIVE...   load image archives into the node
#   scripts/controlplane.sh load-images   build/import Spindle's and etcd's images (prints names)
#   scripts/controlplane.sh exec -- CMD   run CMD on the node with cluster DNS (a host client)
#   scripts/controlplane.sh fail-volume|restore-volume PV MODE   break/mend one PV's file system
#                                     (MODE: read-only, full, permissions, io-error)
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
    up | down | env | status | versions | import-image | fail-volume | restore-volume | exec | load-images) ;;
    *)
        sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//' >&2
        exit 2
        ;;
esac
if [[ "$cmd" == up ]]; then
    # Both installers do nothing when their binaries are built already.
    SPINDLE_ROOT="$ROOT" bash "$ROOT/scripts/install.d/10-controlplane.sh"
    if [[ " ${*:2} " == *" --node "* ]]; then
        SPINDLE_ROOT="$ROOT" bash "$ROOT/scripts/install.d/20-node.sh"
    fi
fi
# -P: never put the current directory on sys.path (the repository root has an operator/
# folder that would shadow the standard library module of that name).
PYTHONPATH="$ROOT/e2e${PYTHONPATH:+:$PYTHONPATH}" exec "$PYTHON" -P -m controlplane "$cmd" --dir "$DIR" "${@:2}"
