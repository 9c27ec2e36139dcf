#!/usr/bin/env bash
# Create the kind cluster, build Spindle's image and load it, install the chart, and
# (with --examples) apply examples/ into namespace spindle-demo. Needs docker, kind, kubectl
# and helm on PATH, and root for the image build (debootstrap; run ./dev sync first for .venv).
# Not run on Spindle's build machines: they have no container engine (see e2e/README.md);
# there, scripts/controlplane.sh up --node is the path that runs, with the same image.
#
#   e2e/kind/up.sh [--examples]   create (or reuse) the cluster and install Spindle
#   e2e/kind/up.sh --delete       delete the cluster
#
# KIND_NODE_IMAGE pins the node image (kindest/node:<Kubernetes version>); unset, kind uses
# the default of its own release.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CLUSTER=spindle
OPERATOR_NAMESPACE=spindle-system
DEMO_NAMESPACE=spindle-demo

for tool in docker kind kubectl helm; do
    command -v "$tool" >/dev/null || { echo "e2e/kind/up.sh: $tool is required on PATH" >&2; exit 1; }
done

if [[ "${1:-}" == --delete ]]; then
    kind delete cluster --name "$CLUSTER"
    exit 0
fi

if ! kind get clusters | grep -qx "$CLUSTER"; then
    kind create cluster --name "$CLUSTER" --config "$ROOT/e2e/kind/cluster.yaml" --wait 180s \
        ${KIND_NODE_IMAGE:+--image "$KIND_NODE_IMAGE"}
fi
kubectl config use-context "kind-$CLUSTER" >/dev/null

# The same image archive the local node imports (e2e/controlplane/spindle_image.py): built once
# per content hash, named spindle:<hash> and spindle:latest (the brokers' default image).
read -r ARCHIVE IMAGE < <(PYTHONPATH="$ROOT/e2e" "$ROOT/.venv/bin/python" -P -m controlplane.spindle_image)
kind load image-archive "$ARCHIVE" --name "$CLUSTER"

# The chart's crds/ are installed first by Helm; --wait waits for the operator to be Available.
helm upgrade --install spindle "$ROOT/charts/spindle" \
    --namespace "$OPERATOR_NAMESPACE" --create-namespace --wait --timeout 5m \
    --set image.tag="${IMAGE#spindle:}"
kubectl wait --for=condition=Established --timeout=60s \
    crd/brokers.spindle.io crd/logvolumes.spindle.io crd/reassignments.spindle.io crd/rebalances.spindle.io

if [[ "${1:-}" == --examples ]]; then
    kubectl create namespace "$DEMO_NAMESPACE" --dry-run=client -o yaml | kubectl apply -f -
    kubectl apply -n "$DEMO_NAMESPACE" -f "$ROOT/examples/"
    kubectl get spindle -n "$DEMO_NAMESPACE"
fi
