#!/usr/bin/env bash
# Create the kind cluster, build and load the operator image, install the chart, and
# (with --examples) apply examples/ into namespace spindle-demo. Needs docker, kind, kubectl
# and helm on PATH. Not run on Spindle's build machines: they have no container engine
# (see e2e/README.md); there, scripts/controlplane.sh is the path that runs.
#
#   e2e/kind/up.sh [--examples]   create (or reuse) the cluster and install Spindle
#   e2e/kind/up.sh --delete       delete the cluster
#
# KIND_NODE_IMAGE pins the node image (kindest/node:<Kubernetes version>); unset, kind uses
# the default of its own release.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CLUSTER=spindle
IMAGE="spindle/operator:$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$ROOT/charts/spindle/Chart.yaml")"
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

docker build -t "$IMAGE" "$ROOT"
kind load docker-image "$IMAGE" --name "$CLUSTER"

# The chart's crds/ are installed first by Helm; --wait waits for the operator to be Available.
helm upgrade --install spindle "$ROOT/charts/spindle" \
    --namespace "$OPERATOR_NAMESPACE" --create-namespace --wait --timeout 5m
kubectl wait --for=condition=Established --timeout=60s \
    crd/brokers.spindle.io crd/logvolumes.spindle.io crd/reassignments.spindle.io crd/rebalances.spindle.io

if [[ "${1:-}" == --examples ]]; then
    kubectl create namespace "$DEMO_NAMESPACE" --dry-run=client -o yaml | kubectl apply -f -
    kubectl apply -n "$DEMO_NAMESPACE" -f "$ROOT/examples/"
    kubectl get spindle -n "$DEMO_NAMESPACE"
fi
