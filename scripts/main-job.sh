#!/usr/bin/env bash
# Spindle's main job, run by `./dev run`. Extended issue by issue.
#
#   ./dev run [--stay-up] [demo args...]
#
# 1. The storage demo: one broker's storage engine over three log directories.
# 2. The operator on a local Kubernetes control plane: start the control plane (built from Go
#    modules, see e2e/README.md), apply crds/, run spindle-operator, apply examples/ into
#    namespace spindle-demo, wait for the Brokers' status, print `kubectl get spindle`.
#    Without a kubelet the broker Pods and claims stay Pending; that is expected here.
#    Everything started is stopped on exit, unless --stay-up is given (then the control plane
#    and the operator keep running; `scripts/controlplane.sh down` and the printed kill
#    command stop them).
set -euo pipefail
cd "$SPINDLE_ROOT"

STAY_UP=0
if [[ "${1:-}" == "--stay-up" ]]; then
    STAY_UP=1
    shift
fi

# -P: do not put the working directory first on sys.path, where the repository's operator/
# folder would shadow the standard library's `operator` module.
python -P -m spindle.broker.storage.demo "$@"

RUN_DIR="$SPINDLE_ROOT/.run/main-job"
export SPINDLE_CONTROLPLANE_DIR="$RUN_DIR/controlplane"
NAMESPACE=spindle-demo
mkdir -p "$RUN_DIR"
log() { printf '[main-job] %s\n' "$*" >&2; }

STARTED_PLANE=0
OPERATOR_PID=""
cleanup() {
    local rc=$?
    if [[ "$STAY_UP" == 1 && "$rc" == 0 ]]; then
        log "staying up: KUBECONFIG=$SPINDLE_CONTROLPLANE_DIR/kubeconfig; operator pid $OPERATOR_PID"
        log "stop with: kill $OPERATOR_PID; scripts/controlplane.sh down (SPINDLE_CONTROLPLANE_DIR=$SPINDLE_CONTROLPLANE_DIR)"
        return
    fi
    if [[ -n "$OPERATOR_PID" ]] && kill -0 "$OPERATOR_PID" 2>/dev/null; then
        log "stopping the operator (pid $OPERATOR_PID)"
        kill -TERM "$OPERATOR_PID" 2>/dev/null || true
        for _ in $(seq 1 40); do
            kill -0 "$OPERATOR_PID" 2>/dev/null || break
            sleep 0.5
        done
        kill -KILL "$OPERATOR_PID" 2>/dev/null || true
        wait "$OPERATOR_PID" 2>/dev/null || true
    fi
    if [[ "$STARTED_PLANE" == 1 ]]; then
        log "stopping the control plane"
        bash scripts/controlplane.sh down >&2 || true
    fi
}
trap cleanup EXIT

if bash scripts/controlplane.sh status >/dev/null 2>&1; then
    log "reusing the control plane already running in $SPINDLE_CONTROLPLANE_DIR"
else
    log "starting the local control plane (fresh state in $SPINDLE_CONTROLPLANE_DIR)"
    # Start from an empty etcd so that the status printed below is this run's work.
    rm -rf "$SPINDLE_CONTROLPLANE_DIR"
    bash scripts/controlplane.sh up >&2
    STARTED_PLANE=1
fi
eval "$(bash scripts/controlplane.sh env)"

log "applying crds/"
kubectl apply -f crds/ >&2
kubectl wait --for=condition=Established --timeout=60s \
    crd/brokers.spindle.io crd/logvolumes.spindle.io \
    crd/reassignments.spindle.io crd/rebalances.spindle.io >&2

log "starting spindle-operator (log: $RUN_DIR/operator.log)"
spindle-operator run --namespace "$NAMESPACE" >"$RUN_DIR/operator.log" 2>&1 &
OPERATOR_PID=$!

kubectl create namespace "$NAMESPACE" --dry-run=client -o yaml | kubectl apply -f - >&2
log "applying examples/ into namespace $NAMESPACE"
kubectl apply -n "$NAMESPACE" -f examples/ >&2

log "waiting for the Brokers' status"
if ! kubectl wait -n "$NAMESPACE" --for=jsonpath='{.status.volumes}'=0/3 --timeout=90s \
    broker/demo-0 broker/demo-1 broker/demo-2 >&2; then
    log "the operator did not report status in time; its log:"
    tail -n 40 "$RUN_DIR/operator.log" >&2
    exit 1
fi
for lv in $(kubectl get logvolumes -n "$NAMESPACE" -o name); do
    kubectl wait -n "$NAMESPACE" --for=jsonpath='{.status.state}'=Pending --timeout=60s "$lv" >/dev/null
done

echo
echo "\$ kubectl get spindle -n $NAMESPACE"
kubectl get spindle -n "$NAMESPACE"
echo
echo "\$ kubectl get pvc,pods,services,configmaps -n $NAMESPACE -l app.kubernetes.io/managed-by=spindle-operator"
kubectl get pvc,pods,services,configmaps -n "$NAMESPACE" -l app.kubernetes.io/managed-by=spindle-operator
