#!/usr/bin/env bash
# Spindle's main job, run by `./dev run`: what Spindle is for, end to end, on this one machine.
# Extended issue by issue.
#
#   ./dev run [--stay-up] [demo args...]
#
# 1. The storage demo: one broker's storage engine over three log directories.
# 2. A real Kubernetes node on this machine (scripts/controlplane.sh up --node: control plane,
#    kube-scheduler, containerd, kubelet, kube-proxy, CoreDNS, StorageClass spindle-local whose
#    volumes are their own file systems; see e2e/README.md).
# 3. Spindle's image (built locally from Debian's packages and PyPI, cached by content hash) and
#    an etcd image imported into the node's containerd.
# 4. `helm install` of charts/spindle: CRDs, the operator as a Pod with its ServiceAccount, etcd.
# 5. The example cluster (examples/cluster.yaml): three brokers, three volumes each (each its
#    own file system); wait until the broker Pods are Ready.
# 6. A Kafka client on this machine (Kafka's own console tools, on the node with cluster DNS)
#    produces to and consumes from the brokers, once the brokers' names resolve and answer.
# 7. Every LogVolume Active with the bytes and replica count its broker reports.
# 8. A disk fails; the operator replaces its volume and the brokers rebuild it.
# 9. One disk of demo-1 skewed on purpose, then an intra-broker Rebalance: its proposal as a
#    table, approved, executed, and the disks' used bytes before -> after.
# 10. `kubectl get spindle`, and where the dashboard is.
# Kafka's Java tools log every retried connection with a stack trace: their stderr goes to
# .run/main-job/kafka-tools.log, and a tool that fails shows its last lines.
# Everything is stopped on exit unless --stay-up is given (then `scripts/controlplane.sh down`
# with the printed SPINDLE_CONTROLPLANE_DIR stops it).
set -euo pipefail
cd "$SPINDLE_ROOT"

STAY_UP=0
if [[ "${1:-}" == "--stay-up" ]]; then
    STAY_UP=1
    shift
fi

step() { printf '\n[main-job] == %s\n' "$*" >&2; }
log() { printf '[main-job] %s\n' "$*" >&2; }
STARTED=$SECONDS

step "1. the storage engine demo"
# -P: do not put the working directory first on sys.path, where the repository's operator/
# folder would shadow the standard library's `operator` module.
python -P -m spindle.broker.storage.demo "$@"

RUN_DIR="$SPINDLE_ROOT/.run/main-job"
export SPINDLE_CONTROLPLANE_DIR="$RUN_DIR/cluster"
OPERATOR_NAMESPACE=spindle-system
NAMESPACE=spindle-demo
BROKERS=(demo-0 demo-1 demo-2)
mkdir -p "$RUN_DIR"
CP=(bash scripts/controlplane.sh)

TOOLS_LOG="$RUN_DIR/kafka-tools.log"
: >"$TOOLS_LOG"
# One of Kafka's tools, on the node with cluster DNS; its stdout is the caller's, its stderr
# (WARNs, stack traces of retried connections) goes to $TOOLS_LOG, shown only if it fails.
kafka_tool() {
    local tool=$1 err rc=0
    shift
    err="$(mktemp "$RUN_DIR/$tool.XXXXXX")"
    "${CP[@]}" exec -- "$tool" "$@" 2>"$err" || rc=$?
    { echo "== $tool $*"; cat "$err"; } >>"$TOOLS_LOG"
    if [[ "$rc" != 0 ]]; then
        log "$tool failed (exit $rc); its last lines (all of them in $TOOLS_LOG):"
        tail -n 15 "$err" >&2
    fi
    rm -f "$err"
    return "$rc"
}

STARTED_CLUSTER=0
cleanup() {
    local rc=$?
    if [[ "$STARTED_CLUSTER" == 1 && "$STAY_UP" == 1 && "$rc" == 0 ]]; then
        log "staying up: eval \"\$(SPINDLE_CONTROLPLANE_DIR=$SPINDLE_CONTROLPLANE_DIR scripts/controlplane.sh env)\""
        log "stop with: SPINDLE_CONTROLPLANE_DIR=$SPINDLE_CONTROLPLANE_DIR scripts/controlplane.sh down"
        return
    fi
    if [[ "$rc" != 0 && "$STARTED_CLUSTER" == 1 ]]; then
        log "failed (exit $rc); what Spindle's resources say:"
        kubectl get spindle -n "$NAMESPACE" >&2 || true
        kubectl get rebalances,reassignments -n "$NAMESPACE" -o jsonpath='{range .items[*]}{.kind}/{.metadata.name}: {.status.phase}{"\n"}{range .status.conditions[*]}  {.type}={.status} {.reason}: {.message}{"\n"}{end}{end}' >&2 || true
        kubectl get pods -n "$NAMESPACE" -l job-name >&2 || true
        log "the operator's log (health probes left out):"
        kubectl logs -n "$OPERATOR_NAMESPACE" deployment/spindle-operator --tail=2000 2>&1 |
            grep -v 'GET /healthz' | tail -30 >&2 || true
    fi
    if [[ "$STARTED_CLUSTER" == 1 ]]; then
        step "stopping the node and the control plane"
        "${CP[@]}" down >&2 || true
    fi
}
trap cleanup EXIT

step "2. a Kubernetes node on this machine"
if "${CP[@]}" status >/dev/null 2>&1; then
    log "stopping the cluster a previous --stay-up left in $SPINDLE_CONTROLPLANE_DIR"
    "${CP[@]}" down >&2
fi
rm -rf "$SPINDLE_CONTROLPLANE_DIR"
STARTED_CLUSTER=1
"${CP[@]}" up --node >&2
eval "$("${CP[@]}" env)"
kubectl get nodes -o wide >&2

step "3. Spindle's image and etcd's, imported into the node's containerd"
IMAGES="$("${CP[@]}" load-images)"
SPINDLE_IMAGE="$(sed -n 's/^spindle=//p' <<<"$IMAGES")"
ETCD_IMAGE="$(sed -n 's/^etcd=//p' <<<"$IMAGES")"
log "images: $SPINDLE_IMAGE (operator, brokers, Spark), $ETCD_IMAGE"

step "4. helm install spindle (CRDs, operator, etcd) into $OPERATOR_NAMESPACE"
# The planner's ServiceAccount and Role go into the namespace the Rebalance runs in (step 9).
kubectl create namespace "$NAMESPACE" >&2
helm install spindle charts/spindle --namespace "$OPERATOR_NAMESPACE" --create-namespace \
    --set image.tag="${SPINDLE_IMAGE#spindle:}" --set image.pullPolicy=Never \
    --set etcd.image.repository="${ETCD_IMAGE%:*}" --set etcd.image.tag="${ETCD_IMAGE##*:}" \
    --set etcd.image.pullPolicy=Never --set "planner.namespaces={$NAMESPACE}" \
    --wait --timeout 5m >&2
kubectl get pods -n "$OPERATOR_NAMESPACE" -o wide >&2

step "5. the example cluster (examples/cluster.yaml) in namespace $NAMESPACE"
kubectl apply -n "$NAMESPACE" -f examples/cluster.yaml >&2
# A broker Pod is Ready when its Kafka port accepts.
for broker in "${BROKERS[@]}"; do
    until kubectl get pod -n "$NAMESPACE" "$broker" >/dev/null 2>&1; do sleep 1; done
    kubectl wait -n "$NAMESPACE" --for=condition=Ready --timeout=300s "pod/$broker" >&2
done
log "three broker Pods Ready, each with its three volumes mounted at its log.dirs"
kubectl get pods,pvc -n "$NAMESPACE" -o wide >&2

step "6. produce and consume with Kafka's console tools, from this machine"
BOOTSTRAP="demo-0.$NAMESPACE.svc:9092,demo-1.$NAMESPACE.svc:9092"
# Ready Pods' names may not resolve in the cluster DNS yet: wait for that, and for the three
# brokers to be registered and answer, before starting a Java client.
"${CP[@]}" exec -- python -P scripts/lib/wait_for_kafka.py --brokers 3 "$BOOTSTRAP" >&2
# Three replicas, so that losing one disk (step 8) loses no record.
kafka_tool kafka-topics --bootstrap-server "$BOOTSTRAP" --create --topic orders \
    --partitions 3 --replication-factor 3 --config min.insync.replicas=2 >&2
seq 1 10 | sed 's/^/order-/' |
    kafka_tool kafka-console-producer --bootstrap-server "$BOOTSTRAP" --topic orders >&2
CONSUMED="$(kafka_tool kafka-console-consumer --bootstrap-server "$BOOTSTRAP" \
    --topic orders --from-beginning --max-messages 10 --timeout-ms 60000 | sort -V)"
printf '%s\n' "$CONSUMED"
[[ "$(wc -l <<<"$CONSUMED")" == 10 ]] || { log "consumed $(wc -l <<<"$CONSUMED") of 10 records"; exit 1; }

step "7. every LogVolume Active, its bytes and replicas as its broker reports them (DescribeLogDirs)"
kubectl wait -n "$NAMESPACE" --for=jsonpath='{.status.state}'=Active --timeout=180s logvolumes --all >&2
kubectl get logvolumes -n "$NAMESPACE" >&2

step "8. a disk fails: the operator replaces its volume and the brokers rebuild it"
# The busiest volume of demo-0 (Broker demo-0's remediation policy is Auto) starts answering
# every I/O with EIO; the operator sees the broker report the directory offline, replaces the
# claim and the volume, and the new empty directory is rebuilt from the other replicas.
VOLUME="$(kubectl get logvolumes -n "$NAMESPACE" -o json | python3 -P -c '
import json, sys
items = [i for i in json.load(sys.stdin)["items"] if i["spec"]["brokerId"] == 0]
best = max(items, key=lambda i: (i.get("status") or {}).get("usedBytes") or 0)
print(best["metadata"]["name"], best["status"]["pvName"])')"
read -r FAILED_LV FAILED_PV <<<"$VOLUME"
FAILED_AT=$SECONDS
"${CP[@]}" fail-volume "$FAILED_PV" io-error >&2
lv_state() { kubectl get logvolume -n "$NAMESPACE" "$FAILED_LV" -o jsonpath='{.status.state}'; }
until [[ "$(lv_state)" =~ ^(Offline|Replacing|Rebuilding)$ ]]; do
    (( SECONDS - FAILED_AT < 60 )) || { log "$FAILED_LV still $(lv_state) after 60 s"; exit 1; }
    sleep 0.2
done
log "$FAILED_LV ($FAILED_PV) failed: $(lv_state) after $((SECONDS - FAILED_AT)) s"
kubectl wait -n "$NAMESPACE" --for=jsonpath='{.status.state}'=Active --timeout=600s \
    "logvolume/$FAILED_LV" >&2
log "$FAILED_LV Active again after $((SECONDS - FAILED_AT)) s, on a new volume $(kubectl get \
    logvolume -n "$NAMESPACE" "$FAILED_LV" -o jsonpath='{.status.pvName}') (was $FAILED_PV)"
kubectl get events -n "$NAMESPACE" --field-selector "involvedObject.name=$FAILED_LV" \
    --sort-by=.lastTimestamp >&2
AGAIN="$(kafka_tool kafka-console-consumer --bootstrap-server "$BOOTSTRAP" \
    --topic orders --from-beginning --max-messages 10 --timeout-ms 60000 | sort -V)"
[[ "$AGAIN" == "$CONSUMED" ]] || { log "after the disk failure: $AGAIN"; exit 1; }
log "all 10 records read back after the disk failure"

step "9. one disk skewed on purpose, then a rebalance (examples/rebalance.yaml) planned, approved and executed"
# The demo's disks are balanced (each holds a few hundred bytes of records and ~16Mi of file
# system), so a Rebalance would plan nothing. Skew demo-1: topic skew gets six partitions whose
# only replica is on broker 1, moved while still empty (nothing to copy) into its data-0 with
# kafka-reassign-partitions' log_dirs (AlterReplicaLogDirs), then ~35Mi is written into them.
SKEW_LV=demo-1-data-0
SKEW_DIR=/var/lib/spindle/data-0
SKEW_AT=$SECONDS
kafka_tool kafka-topics --bootstrap-server "$BOOTSTRAP" --create --topic skew \
    --replica-assignment 1,1,1,1,1,1 >&2
printf '{"version":1,"partitions":[%s]}\n' "$(for p in 0 1 2 3 4 5; do
    printf '{"topic":"skew","partition":%d,"replicas":[1],"log_dirs":["%s"]}' "$p" "$SKEW_DIR"
done | sed 's/}{/},{/g')" >"$RUN_DIR/skew-dirs.json"
kafka_tool kafka-reassign-partitions --bootstrap-server "$BOOTSTRAP" \
    --reassignment-json-file "$RUN_DIR/skew-dirs.json" --execute >/dev/null
until VERIFY="$(kafka_tool kafka-reassign-partitions --bootstrap-server "$BOOTSTRAP" \
    --reassignment-json-file "$RUN_DIR/skew-dirs.json" --verify)" &&
    ! grep -q 'in progress' <<<"$VERIFY"; do
    (( SECONDS - SKEW_AT < 60 )) || { log "topic skew still not in $SKEW_DIR after 60 s"; exit 1; }
    sleep 1
done
PAD="$(head -c 1000 /dev/zero | tr '\0' x)"
seq -f "skew-%05g $PAD" 1 36000 | kafka_tool kafka-console-producer \
    --bootstrap-server "$BOOTSTRAP" --topic skew --producer-property batch.size=262144 \
    --producer-property linger.ms=20 >&2
lv_used() {
    local used
    used="$(kubectl get logvolume -n "$NAMESPACE" "$1" -o jsonpath='{.status.usedBytes}')"
    echo "${used:-0}"
}
until (( $(lv_used "$SKEW_LV") > 32 * 2**20 )); do
    (( SECONDS - SKEW_AT < 120 )) || { log "$SKEW_LV shows $(lv_used "$SKEW_LV") bytes"; exit 1; }
    sleep 1
done
log "skewed in $((SECONDS - SKEW_AT)) s: topic skew (6 partitions on broker 1 only, 36,000 records of 1 KB) all in demo-1's $SKEW_DIR"
kubectl get logvolumes -n "$NAMESPACE" demo-1-data-0 demo-1-data-1 demo-1-data-2 >&2
SKEWED_USED="$(lv_used "$SKEW_LV")"
kubectl get logvolumes -n "$NAMESPACE" -o json >"$RUN_DIR/volumes-before.json"

kubectl apply -n "$NAMESPACE" -f examples/rebalance.yaml >&2
PLAN_AT=$SECONDS
kubectl wait -n "$NAMESPACE" --for=jsonpath='{.status.phase}'=ProposalReady --timeout=600s \
    rebalance/demo-disks >&2
log "proposal ready after $((SECONDS - PLAN_AT)) s (the planner's Job):"
kubectl get pods -n "$NAMESPACE" -l job-name >&2 || true
kubectl get rebalance -n "$NAMESPACE" demo-disks -o json >"$RUN_DIR/rebalance.json"
python -P scripts/lib/rebalance_tables.py proposal <"$RUN_DIR/rebalance.json" >&2
MOVES="$(kubectl get rebalance -n "$NAMESPACE" demo-disks -o jsonpath='{.status.proposal.moves}')"
(( MOVES > 0 )) || { log "the planner proposed no move for the skewed disk"; exit 1; }
kubectl patch rebalance -n "$NAMESPACE" demo-disks --type=merge -p '{"spec":{"approve":true}}' >&2
APPROVED_AT=$SECONDS
kubectl wait -n "$NAMESPACE" --for=jsonpath='{.status.phase}'=Completed --timeout=600s \
    rebalance/demo-disks >&2
log "$MOVES moves executed in $((SECONDS - APPROVED_AT)) s"
# The LogVolumes' status follows the brokers' DescribeLogDirs on the operator's next probe.
DONE_AT=$SECONDS
until (( $(lv_used "$SKEW_LV") < SKEWED_USED )) || (( SECONDS - DONE_AT > 60 )); do sleep 1; done
log "demo-1's disks as its broker reports them (DescribeLogDirs), before -> after:"
kubectl get logvolumes -n "$NAMESPACE" -o json |
    python -P scripts/lib/rebalance_tables.py volumes "$RUN_DIR/volumes-before.json" 1 >&2

step "10. what Spindle manages"
echo "\$ kubectl get spindle -n $NAMESPACE"
kubectl get spindle -n "$NAMESPACE"
echo
echo "dashboard: kubectl port-forward -n $OPERATOR_NAMESPACE deployment/spindle-operator 8081:8081 (then http://127.0.0.1:8081)"
log "done in $((SECONDS - STARTED)) s"
