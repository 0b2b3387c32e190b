#!/usr/bin/env bash
# Starts a local Kubernetes control plane on 127.0.0.1, with no container engine:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok (which plays the
# kubelet of simulated nodes: they go Ready, pods scheduled onto them go Running). Then it
# installs Nereid's CRDs (build/crds/) and registers the nodes: cloud nodes, and edge
# nodes labelled node-role.kubernetes.io/edge="". The integration tests and the local
# demo both run against it; see test/framework.
#
# Usage: hack/local-up.sh [-h|--help]
#
# Environment:
#   NEREID_OUT_DIR                 state dir (default <repo>/_output/local); one control
#                                  plane per out dir
#   NEREID_CACHE_DIR               built tools (default <repo>/.cache); see build-tools.sh
#   NEREID_PORT_BASE               first of 20 ports to use; default derived from a
#                                  checksum of the out dir (see hack/lib/ports.sh)
#   NEREID_CLOUD_NODES             cloud node names (default "cloud-0")
#   NEREID_EDGE_NODES              edge node names (default "edge-0 edge-1")
#   NEREID_REAL_NODES              how many real edge nodes to add beside the kwok
#                                  ones (default 0): real-0, real-1, … each a
#                                  kubelet, a containerd and a kube-proxy built from
#                                  the same modules, running real containers, in
#                                  namespaces and cgroups of the run's own (see
#                                  hack/realnode and docs/local-run.md#real-nodes).
#                                  Needs root; installs what it lacks with apt
#   NEREID_REAL_CLOUD_NODES        with NEREID_REAL_NODES, how many real cloud nodes
#                                  come too (default 1: real-cloud-0), where the
#                                  jobs' cloud workers run (an aggregator, a DIJob's
#                                  coordinator)
#   NEREID_LC_NODES                the nodes that get a LocalController: "edge" (default:
#                                  the edge nodes), "all" (every node, cloud ones too, as
#                                  Sedna runs them; the hub then accepts every node), or
#                                  a list of node names (at most 4)
#   NEREID_KWOK_POD_DELETE_DELAY   how long a deleted pod stays Terminating before kwok
#                                  removes it: 0 (default), 1500ms, 5s, 2m. Per pod, the
#                                  annotation nereid.io/kwok-delete-delay overrides it
#                                  (hack/kwok/pod-stages.yaml). Read when kwok starts.
#   NEREID_GANG_API=0              a cluster without Kubernetes' gang scheduling API, as
#                                  before 1.37 (default 1: the GenericWorkload gate on the
#                                  API server, scheduler and controller-manager, and
#                                  scheduling.k8s.io/v1beta1 served: Workloads, PodGroups)
#   NEREID_DI_SERVER_PORT          the loopback port of the GlobalManager's DIJob replicas
#                                  API, v2alpha1 (default: offset 6 of the port block;
#                                  0 serves none). HTTPS with the GlobalManager's own CA,
#                                  as the chart serves it; DIJob pods get its URL, CA and
#                                  a token for it
#   NEREID_DI_V1_SERVER_PORT       the loopback port of its replicas server of v1alpha1
#                                  DIJobs' coordinators (default: offset 7 of the port
#                                  block; 0 serves none). Plain HTTP; coordinators get
#                                  127.0.0.1:<port> as KUBERNETES_SERVER_URL
#   NEREID_POD_CIDR                the addresses kwok gives pods (default 127.64.0.1/16,
#                                  loopback: a test or demo speaks from a pod's address)
#   NEREID_READY_TIMEOUT           seconds to wait for each component (default 120)
#   NEREID_SKIP_BUILD=1            use the binaries in the cache as they are
#   NEREID_GLOBALMANAGER=0         do not start Nereid's GlobalManager and LocalControllers
#                                  (the integration tests start their own)
#   NEREID_INSTALL_CRDS=0          do not install Nereid's CRDs (a cluster that starts
#                                  with Sedna's, as test/integration/sednaswitch needs)
#   NEREID_APISERVER_PROFILING=1   the API server serves /debug/pprof, to whom RBAC
#                                  allows it (the admin kubeconfig); default off. The
#                                  benchmark profiles the API server with it
#   NEREID_NODE_MONITOR_GRACE_PERIOD  how long a node's Lease may go unrenewed before the
#                                  controller-manager takes the node for not ready and
#                                  its pods with it (default: Kubernetes' own, 50s). kwok
#                                  renews every node's Lease every 10s; with thousands of
#                                  nodes on a small machine it falls behind, which no
#                                  cluster of real kubelets does: the edge bench at 9,800
#                                  nodes sets 10m
#
# It is idempotent: when everything recorded for the out dir is running and healthy it
# says so, re-applies the CRDs and nodes, and exits 0. When only some components run, it
# keeps those and starts the missing ones (each component retries its connections, so
# the order only matters for readiness). Stop with hack/local-down.sh [--purge].
#
# State dir layout ($NEREID_OUT_DIR):
#   kubeconfig                admin kubeconfig (token in group system:masters),
#                             server https://127.0.0.1:<apiserver port>
#   env.sh                    `source` it: exports KUBECONFIG, NEREID_OUT_DIR,
#                             NEREID_KUBECONFIG, NEREID_BIN_DIR (etcd, kube-*, kubectl,
#                             kwok), NEREID_PORT_BASE, NEREID_ETCD_PORT,
#                             NEREID_ETCD_PEER_PORT, NEREID_APISERVER_PORT, NEREID_KCM_PORT,
#                             NEREID_SCHEDULER_PORT, NEREID_KWOK_PORT,
#                             NEREID_RESERVED_PORT_FIRST, NEREID_RESERVED_PORT_LAST
#                             (the last two bound the offsets 10-19 kept for the
#                             GlobalManager and the LocalControllers)
#   kubeconfigs/<component>.kubeconfig   each component's own identity; the
#                             GlobalManager's is the chart's ServiceAccount
#                             (nereid-system/nereid-globalmanager) with the chart's RBAC
#   bin/                      globalmanager, localcontroller and localrun, built from the
#                             working tree
#   edge/ca.crt               the edge hub's CA; edge/<node>/ holds the LocalController
#                             of each node: token, data/, root/ (its node's root), and
#                             lc-server (its worker API, a worker's LC_SERVER)
#   certs/                    ca.crt/ca.key (cluster CA), apiserver.crt/.key (serving,
#                             SANs 127.0.0.1, 10.96.0.1, localhost, kubernetes.default…),
#                             sa.key/sa.pub (service-account tokens), tokens.csv (token,
#                             user, uid, groups), front-proxy-ca.*, front-proxy-client.*
#   etcd/                     etcd data
#   kwok/stages.yaml          the rendered kwok Stages
#   logs/<component>.log      output of each process (appended across restarts)
#   pids/<component>.pid      pid of each process (a session leader: see hack/lib/process.sh)
set -euo pipefail

# shellcheck source=hack/lib/init.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"
# shellcheck source=hack/lib/ports.sh
source "${NEREID_ROOT}/hack/lib/ports.sh"
# shellcheck source=hack/lib/process.sh
source "${NEREID_ROOT}/hack/lib/process.sh"
# shellcheck source=hack/lib/pki.sh
source "${NEREID_ROOT}/hack/lib/pki.sh"
# shellcheck source=hack/lib/version.sh
source "${NEREID_ROOT}/hack/lib/version.sh"

usage() {
  sed -n '2,/^set -euo pipefail/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'
}

case "${1:-}" in
  -h | --help)
    usage
    exit 0
    ;;
  "") ;;
  *)
    usage >&2
    nereid::fatal "unknown argument: $1"
    ;;
esac

readonly SERVICE_CIDR="10.96.0.0/16"
# Pod IPs that kwok hands out. Its default is a /24, which a benchmark of hundreds of
# pods would exhaust. It hands out the given address first, so start past the network
# address. They are loopback addresses, which are all this machine's: a LocalController
# takes a worker's report only from the worker pod's address, and the demos and tests
# post as a pod from its address. (The EndpointSlice controller refuses loopback
# addresses and retries: the benchmark, which posts as no pod, takes others.)
readonly POD_CIDR="${NEREID_POD_CIDR:-127.64.0.1/16}"
# kwok manages only nodes carrying this annotation (the convention of kwok's own
# tooling), so a node registered by something else is left alone.
readonly KWOK_NODE_ANNOTATION="kwok.x-k8s.io/node"
readonly KWOK_NODE_ANNOTATION_VALUE="fake"

CLOUD_NODES="${NEREID_CLOUD_NODES-cloud-0}"
# Real nodes: the cloud ones first, then the edge ones; all of them in REAL_NODES.
REAL_NODES=""
REAL_EDGE_NODES=""
if [[ -n "${NEREID_REAL_NODES:-}" && "${NEREID_REAL_NODES}" != 0 ]]; then
  [[ "${NEREID_REAL_NODES}" =~ ^[0-9]+$ ]] || nereid::fatal "NEREID_REAL_NODES=${NEREID_REAL_NODES} is not a number of nodes"
  [[ "${NEREID_REAL_CLOUD_NODES:-1}" =~ ^[0-9]+$ ]] || nereid::fatal "NEREID_REAL_CLOUD_NODES=${NEREID_REAL_CLOUD_NODES} is not a number of nodes"
  REAL_EDGE_NODES="$(for ((i = 0; i < NEREID_REAL_NODES; i++)); do printf 'real-%d ' "${i}"; done)"
  REAL_EDGE_NODES="${REAL_EDGE_NODES% }"
  REAL_NODES="$(for ((i = 0; i < ${NEREID_REAL_CLOUD_NODES:-1}; i++)); do printf 'real-cloud-%d ' "${i}"; done)${REAL_EDGE_NODES}"
fi
# The API server's flags for real nodes (realnode apiserver-flags), set in main.
REAL_APISERVER_FLAGS=()
EDGE_NODES="${NEREID_EDGE_NODES-edge-0 edge-1}"
READY_TIMEOUT="${NEREID_READY_TIMEOUT:-120}"

# Kubernetes' own gang scheduling (Workload and PodGroup, scheduling.k8s.io/v1beta1) is
# beta in 1.37 and off by default: its feature gate on every component that knows it, and
# the beta API served. The scheduler's default profile then has the GangScheduling plugin.
GANG_GATES=()
GANG_API=()
if [[ "${NEREID_GANG_API:-1}" != 0 ]]; then
  GANG_GATES=(--feature-gates=GenericWorkload=true)
  GANG_API=(--runtime-config=scheduling.k8s.io/v1beta1=true)
fi
BIN="${NEREID_BIN_DIR}"
CERTS="${NEREID_OUT_DIR}/certs"
KUBECONFIG_ADMIN="${NEREID_OUT_DIR}/kubeconfig"
ENV_FILE="${NEREID_OUT_DIR}/env.sh"

kubectl_admin() {
  "${BIN}/kubectl" --kubeconfig "${KUBECONFIG_ADMIN}" "$@"
}

component_kubeconfig() { printf '%s/kubeconfigs/%s.kubeconfig\n' "${NEREID_OUT_DIR}" "$1"; }

# delete_delay_ms converts NEREID_KWOK_POD_DELETE_DELAY ("0", "1500ms", "5s", "2m") to
# milliseconds.
delete_delay_ms() {
  local d="${NEREID_KWOK_POD_DELETE_DELAY:-0}"
  if [[ "${d}" =~ ^([0-9]+)(ms|s|m)?$ ]]; then
    local n="${BASH_REMATCH[1]}" unit="${BASH_REMATCH[2]}"
    case "${unit}" in
      ms) echo "$((10#${n}))" ;;
      s) echo "$((10#${n} * 1000))" ;;
      m) echo "$((10#${n} * 60000))" ;;
      "")
        ((10#${n} == 0)) || nereid::fatal "NEREID_KWOK_POD_DELETE_DELAY=${d} needs a unit: ms, s or m (e.g. 5s)"
        echo 0
        ;;
    esac
  else
    nereid::fatal "NEREID_KWOK_POD_DELETE_DELAY=${d} is not a duration like 1500ms, 5s or 2m"
  fi
}

# --- health checks: each succeeds when the component serves ---------------------------

healthy_etcd() {
  curl -fsS --max-time 2 "http://127.0.0.1:${NEREID_ETCD_PORT}/health" | grep -q '"health":"true"'
}

healthy_kube_apiserver() {
  curl -fsS --max-time 3 --cacert "${CERTS}/ca.crt" \
    -H "Authorization: Bearer $(nereid::pki::token admin)" \
    "https://127.0.0.1:${NEREID_APISERVER_PORT}/readyz" | grep -qx ok
}

# The controller-manager and the scheduler serve /healthz on their secure ports with
# certificates they make up in memory, hence -k; /healthz needs no credentials.
healthy_kube_controller_manager() {
  curl -fsSk --max-time 2 "https://127.0.0.1:${NEREID_KCM_PORT}/healthz" | grep -qx ok
}

healthy_kube_scheduler() {
  curl -fsSk --max-time 2 "https://127.0.0.1:${NEREID_SCHEDULER_PORT}/healthz" | grep -qx ok
}

healthy_kwok() {
  curl -fsS --max-time 2 "http://127.0.0.1:${NEREID_KWOK_PORT}/healthz" | grep -qx ok
}

healthy() { "healthy_${1//-/_}"; }

# --- starting each component ---------------------------------------------------------

start_etcd() {
  mkdir -p "${NEREID_OUT_DIR}/etcd"
  chmod 700 "${NEREID_OUT_DIR}/etcd"
  # --unsafe-no-fsync: this etcd holds a throw-away dev/test cluster on a small VM, where
  # fsync latency would dominate every write; losing it on a power cut costs nothing.
  nereid::process::start etcd "${BIN}/etcd" \
    --name=nereid-local \
    --data-dir="${NEREID_OUT_DIR}/etcd" \
    --listen-client-urls="http://127.0.0.1:${NEREID_ETCD_PORT}" \
    --advertise-client-urls="http://127.0.0.1:${NEREID_ETCD_PORT}" \
    --listen-peer-urls="http://127.0.0.1:${NEREID_ETCD_PEER_PORT}" \
    --initial-advertise-peer-urls="http://127.0.0.1:${NEREID_ETCD_PEER_PORT}" \
    --initial-cluster="nereid-local=http://127.0.0.1:${NEREID_ETCD_PEER_PORT}" \
    --unsafe-no-fsync \
    --log-level=warn
}

start_kube_apiserver() {
  # --advertise-address: without it the apiserver looks for a routable host address,
  #   which a machine without a default route does not have.
  # --endpoint-reconciler-type=none: the reconciler would publish 127.0.0.1 as the
  #   endpoint of the "kubernetes" Service, which Endpoints validation rejects
  #   (loopback); nothing here runs in a pod network that would use it.
  # --service-cluster-ip-range is a /16: a /24 is full after 253 Services.
  nereid::process::start kube-apiserver "${BIN}/kube-apiserver" \
    --bind-address=127.0.0.1 \
    --secure-port="${NEREID_APISERVER_PORT}" \
    --advertise-address=127.0.0.1 \
    --endpoint-reconciler-type=none \
    --etcd-servers="http://127.0.0.1:${NEREID_ETCD_PORT}" \
    --tls-cert-file="${CERTS}/apiserver.crt" \
    --tls-private-key-file="${CERTS}/apiserver.key" \
    --client-ca-file="${CERTS}/ca.crt" \
    --token-auth-file="${CERTS}/tokens.csv" \
    --authorization-mode=Node,RBAC \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="${CERTS}/sa.pub" \
    --service-account-signing-key-file="${CERTS}/sa.key" \
    --service-cluster-ip-range="${SERVICE_CIDR}" \
    --requestheader-client-ca-file="${CERTS}/front-proxy-ca.crt" \
    --requestheader-allowed-names=front-proxy-client \
    --requestheader-username-headers=X-Remote-User \
    --requestheader-group-headers=X-Remote-Group \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --proxy-client-cert-file="${CERTS}/front-proxy-client.crt" \
    --proxy-client-key-file="${CERTS}/front-proxy-client.key" \
    --allow-privileged=true \
    "${GANG_GATES[@]}" "${GANG_API[@]}" \
    "${REAL_APISERVER_FLAGS[@]}" \
    --profiling="$([[ "${NEREID_APISERVER_PROFILING:-0}" == 1 ]] && echo true || echo false)"
}

start_kube_controller_manager() {
  local kc
  kc="$(component_kubeconfig kube-controller-manager)"
  local -a node_monitor=()
  if [[ -n "${NEREID_NODE_MONITOR_GRACE_PERIOD:-}" ]]; then
    node_monitor=(--node-monitor-grace-period="${NEREID_NODE_MONITOR_GRACE_PERIOD}")
  fi
  # --controllers='*' runs every on-by-default controller: garbage collection (cascade
  # deletion), node lifecycle (lifts the not-ready taint once kwok reports a node Ready),
  # the service-account and token controllers, namespace deletion, Deployments,
  # ReplicaSets, HPA... none needs a cloud provider.
  # --leader-elect=false: one instance; a restart then does not wait out a lease.
  # --use-service-account-credentials: each controller acts as its own ServiceAccount,
  # as in kubeadm clusters, so RBAC behaves here as it does there.
  nereid::process::start kube-controller-manager "${BIN}/kube-controller-manager" \
    --kubeconfig="${kc}" \
    --authentication-kubeconfig="${kc}" \
    --authorization-kubeconfig="${kc}" \
    --bind-address=127.0.0.1 \
    --secure-port="${NEREID_KCM_PORT}" \
    --controllers='*' \
    --leader-elect=false \
    --service-account-private-key-file="${CERTS}/sa.key" \
    --root-ca-file="${CERTS}/ca.crt" \
    --cluster-signing-cert-file="${CERTS}/ca.crt" \
    --cluster-signing-key-file="${CERTS}/ca.key" \
    --use-service-account-credentials=true \
    "${GANG_GATES[@]}" \
    "${node_monitor[@]}" \
    --profiling=false
}

start_kube_scheduler() {
  local kc
  kc="$(component_kubeconfig kube-scheduler)"
  nereid::process::start kube-scheduler "${BIN}/kube-scheduler" \
    --kubeconfig="${kc}" \
    --authentication-kubeconfig="${kc}" \
    --authorization-kubeconfig="${kc}" \
    --bind-address=127.0.0.1 \
    --secure-port="${NEREID_SCHEDULER_PORT}" \
    --leader-elect=false \
    "${GANG_GATES[@]}" \
    --profiling=false
}

start_kwok() {
  mkdir -p "${NEREID_OUT_DIR}/kwok"
  sed "s/NEREID_POD_DELETE_DELAY_MS/$(delete_delay_ms)/" \
    "${NEREID_ROOT}/hack/kwok/pod-stages.yaml" >"${NEREID_OUT_DIR}/kwok/stages.yaml"
  { printf -- '---\n'; cat "${NEREID_ROOT}/hack/kwok/node-stages.yaml"; } >>"${NEREID_OUT_DIR}/kwok/stages.yaml"
  # KWOK_WORKDIR keeps kwok from reading the user's ~/.kwok/kwok.yaml.
  # --server-address/--node-port: the simulated kubelets' endpoint (and /healthz) on our
  # loopback port instead of kwok's default 0.0.0.0:10247.
  # --node-lease-duration-seconds=40: kwok holds each node's Lease like a kubelet, so
  # the node-lifecycle controller sees live nodes between status heartbeats.
  KWOK_WORKDIR="${NEREID_OUT_DIR}/kwok" nereid::process::start kwok "${BIN}/kwok" \
    --kubeconfig="$(component_kubeconfig kwok)" \
    --config="${NEREID_OUT_DIR}/kwok/stages.yaml" \
    --manage-nodes-with-annotation-selector="${KWOK_NODE_ANNOTATION}=${KWOK_NODE_ANNOTATION_VALUE}" \
    --server-address="127.0.0.1:${NEREID_KWOK_PORT}" \
    --node-ip=127.0.0.1 \
    --node-port="${NEREID_KWOK_PORT}" \
    --cidr="${POD_CIDR}" \
    --node-lease-duration-seconds=40
}

# ensure_component starts COMPONENT unless it already runs, then waits until it serves.
ensure_component() {
  local c="$1" what
  if nereid::process::running "${c}"; then
    nereid::log "${c} already running (pid $(nereid::process::pid "${c}"))"
  else
    nereid::log "starting ${c}"
    "start_${c//-/_}"
  fi
  case "${c}" in
    etcd) what="/health" ;;
    kube-apiserver) what="/readyz" ;;
    *) what="/healthz" ;;
  esac
  nereid::process::wait_ready "${c}" "${READY_TIMEOUT}" "${what} on port $(nereid::ports::of "${c}" | cut -d' ' -f1)" healthy "${c}"
}

# --- files shared with later scripts and the Go test framework ------------------------

write_env_file() {
  cat >"${ENV_FILE}.tmp" <<EOF
# Written by hack/local-up.sh; source it to use this local control plane.
export NEREID_OUT_DIR='${NEREID_OUT_DIR}'
export NEREID_KUBECONFIG='${KUBECONFIG_ADMIN}'
export KUBECONFIG='${KUBECONFIG_ADMIN}'
export NEREID_BIN_DIR='${BIN}'
export NEREID_PORT_BASE=${NEREID_PORT_BASE}
export NEREID_ETCD_PORT=${NEREID_ETCD_PORT}
export NEREID_ETCD_PEER_PORT=${NEREID_ETCD_PEER_PORT}
export NEREID_APISERVER_PORT=${NEREID_APISERVER_PORT}
export NEREID_KCM_PORT=${NEREID_KCM_PORT}
export NEREID_SCHEDULER_PORT=${NEREID_SCHEDULER_PORT}
export NEREID_KWOK_PORT=${NEREID_KWOK_PORT}
export NEREID_RESERVED_PORT_FIRST=${NEREID_RESERVED_PORT_FIRST}
export NEREID_RESERVED_PORT_LAST=${NEREID_RESERVED_PORT_LAST}
export NEREID_REAL_NODES='${REAL_NODES}'
EOF
  mv -f "${ENV_FILE}.tmp" "${ENV_FILE}"
}

# check_port_base refuses to mix port blocks: components already running for this out
# dir listen where env.sh says, whatever NEREID_PORT_BASE says now.
check_port_base() {
  local c recorded
  [[ -f "${ENV_FILE}" ]] || return 0
  recorded="$(sed -n 's/^export NEREID_PORT_BASE=//p' "${ENV_FILE}")"
  [[ -n "${recorded}" && "${recorded}" != "${NEREID_PORT_BASE}" ]] || return 0
  for c in "${NEREID_COMPONENTS[@]}"; do
    if nereid::process::running "${c}"; then
      nereid::fatal "the control plane in ${NEREID_OUT_DIR} runs on ports ${recorded}+, not ${NEREID_PORT_BASE}+; stop it first (hack/local-down.sh) or unset NEREID_PORT_BASE"
    fi
  done
}

# --- cluster content -----------------------------------------------------------------

install_crds() {
  local dir="${NEREID_ROOT}/build/crds"
  if [[ "${NEREID_INSTALL_CRDS:-1}" == "0" ]]; then
    nereid::log "NEREID_INSTALL_CRDS=0: not installing Nereid's CRDs"
    return
  fi
  if ! compgen -G "${dir}/*.yaml" >/dev/null; then
    nereid::log "no CRDs in build/crds/ yet; skipping their installation"
    return
  fi
  nereid::log "installing CRDs from build/crds/"
  # Over an earlier GlobalManager's loopback URL the DIJob CRD takes the file's Service
  # (its clientConfig says url: null, see hack/crdconversion); the GlobalManager,
  # (re)started below, points it at itself again.
  local out
  out="$(kubectl_admin apply -f "${dir}/" 2>&1 >/dev/null)" || nereid::fatal "kubectl apply -f ${dir}/ failed: ${out}"
  kubectl_admin wait --for=condition=Established --timeout=60s -f "${dir}/" >/dev/null ||
    nereid::fatal "the CRDs in ${dir}/ did not become Established"
}

# node_manifest NAME ROLE prints a Node for kwok to manage. The not-ready taint that the
# NodeTaint admission plugin adds on create goes away when the node-lifecycle controller
# sees kwok's Ready condition.
node_manifest() {
  local name="$1" role="$2"
  cat <<EOF
apiVersion: v1
kind: Node
metadata:
  name: ${name}
  annotations:
    ${KWOK_NODE_ANNOTATION}: ${KWOK_NODE_ANNOTATION_VALUE}
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    kubernetes.io/hostname: ${name}
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    type: kwok
EOF
  if [[ "${role}" == edge ]]; then
    printf '    node-role.kubernetes.io/edge: ""\n'
  fi
  printf -- '---\n'
}

register_nodes() {
  local n nodes=() manifest=""
  for n in ${CLOUD_NODES}; do
    nodes+=("${n}")
    manifest+="$(node_manifest "${n}" cloud)"$'\n'
  done
  for n in ${EDGE_NODES}; do
    nodes+=("${n}")
    manifest+="$(node_manifest "${n}" edge)"$'\n'
  done
  if ((${#nodes[@]} == 0)); then
    nereid::log "no nodes requested (NEREID_CLOUD_NODES and NEREID_EDGE_NODES are empty)"
    return
  fi
  nereid::log "registering nodes: cloud [${CLOUD_NODES}] edge [${EDGE_NODES}]"
  printf '%s' "${manifest}" | kubectl_admin apply -f - >/dev/null || nereid::fatal "registering the nodes failed"

  local deadline=$((SECONDS + READY_TIMEOUT)) pending
  while true; do
    pending=()
    for n in "${nodes[@]}"; do
      node_schedulable "${n}" || pending+=("${n}")
    done
    ((${#pending[@]} == 0)) && break
    if ! nereid::process::running kwok; then
      nereid::process::fail_component kwok "exited while the nodes were coming up"
    fi
    if ((SECONDS >= deadline)); then
      kubectl_admin get nodes -o wide >&2 || true
      nereid::process::fail_component kwok "did not make nodes ${pending[*]} Ready and schedulable within ${READY_TIMEOUT}s (kube-controller-manager's log tells whether node lifecycle lifted the not-ready taint: $(nereid::process::log_file kube-controller-manager))"
    fi
    sleep 0.5
  done
  nereid::log "nodes Ready and schedulable: ${nodes[*]}"
}

# node_schedulable succeeds when NAME is Ready and carries none of the taints that keep
# pods off an unready node.
node_schedulable() {
  local out
  out="$(kubectl_admin get node "$1" -o jsonpath='{range .status.conditions[?(@.type=="Ready")]}{.status}{end} {range .spec.taints[*]}{.key} {end}' 2>/dev/null)" || return 1
  [[ "${out}" == True* && "${out}" != *node.kubernetes.io/not-ready* && "${out}" != *node.kubernetes.io/unreachable* ]]
}

# wait_for_default_service_account waits until the controller-manager has created the
# "default" ServiceAccount of the "default" namespace: until then the ServiceAccount
# admission plugin rejects every pod created there.
wait_for_default_service_account() {
  local deadline=$((SECONDS + READY_TIMEOUT))
  until kubectl_admin get serviceaccount default --namespace default >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      nereid::process::fail_component kube-controller-manager "did not create the default ServiceAccount within ${READY_TIMEOUT}s"
    fi
    sleep 0.5
  done
}

print_usage_hint() {
  # The GlobalManager's addresses (edge hub, DIJob replicas APIs) as its ready line
  # stated them, for a reader who scrolled past it.
  local served=""
  if [[ "${NEREID_GLOBALMANAGER:-1}" != "0" ]]; then
    served="$(localrun endpoints | sed 's/^/  /')" || served=""
    if [[ -n "${served}" ]]; then
      served=$'The GlobalManager serves:\n'"${served}"
    fi
  fi
  cat >&2 <<EOF

Local control plane is up (${NEREID_OUT_DIR}; ports ${NEREID_PORT_BASE}-$((NEREID_PORT_BASE + 19))).
Use it with:
  export KUBECONFIG=${KUBECONFIG_ADMIN}
  kubectl get nodes
(or: source ${ENV_FILE}; kubectl is also at ${BIN}/kubectl)
See the fleet and the jobs in a browser: NEREID_OUT_DIR=${NEREID_OUT_DIR} make dashboard (it prints the URL to open)
Logs are in ${NEREID_OUT_DIR}/logs/. Stop it with: NEREID_OUT_DIR=${NEREID_OUT_DIR} hack/local-down.sh [--purge]
${served}
EOF
}

# localrun runs hack/localrun's command $1 with the local control plane's flags, the
# same for each of its commands.
localrun() {
  "${NEREID_OUT_DIR}/bin/localrun" "$1" \
    --out-dir="${NEREID_OUT_DIR}" \
    --kubeconfig="${KUBECONFIG_ADMIN}" \
    --manifests="${NEREID_ROOT}/build/deploy/nereid.yaml" \
    --cloud-nodes="${CLOUD_NODES}" \
    --edge-nodes="${EDGE_NODES}" \
    --lc-nodes="${NEREID_LC_NODES:-edge}" \
    --first-port="${NEREID_RESERVED_PORT_FIRST}" \
    --di-server-port="${NEREID_DI_SERVER_PORT}" \
    --di-v1-server-port="${NEREID_DI_V1_SERVER_PORT}" \
    --real-nodes="${REAL_NODES}" \
    --helm="${BIN}/helm" \
    --chart="${NEREID_ROOT}/build/charts/nereid" \
    --ready-timeout="${READY_TIMEOUT}s"
}

# ensure_nereid builds the GlobalManager and the LocalController from the working tree
# and (re)starts them with hack/localrun, as the integration tests start theirs (package
# hack/localrun): the GlobalManager as the chart's ServiceAccount with the chart's RBAC,
# one LocalController per node of NEREID_LC_NODES, each proving its node with a token
# bound to its node's Pod of the LocalControllers' DaemonSet (nereid-local). Their
# ports are the reserved ones: the GlobalManager's health/metrics at +10, its edge hub
# (wss) at +11, then per LocalController i its worker API at +12+2i and its
# health/metrics at +13+2i (so at most four LocalControllers); the GlobalManager's
# DIJob replicas API is at NEREID_DI_SERVER_PORT (+6 by default), its v1 replicas
# server at NEREID_DI_V1_SERVER_PORT (+7 by default).
ensure_nereid() {
  if [[ "${NEREID_GLOBALMANAGER:-1}" == "0" ]]; then
    return
  fi
  nereid::log "building the GlobalManager and the LocalController from the working tree"
  (cd "${NEREID_ROOT}" && go build -ldflags "$(nereid::version::ldflags)" -o "${NEREID_OUT_DIR}/bin/" ./cmd/globalmanager ./cmd/localcontroller ./hack/localrun/cmd/localrun) ||
    nereid::fatal "building cmd/globalmanager, cmd/localcontroller and hack/localrun/cmd/localrun failed"
  localrun identities || exit 1
  # What runs is the earlier build: stop it, and a LocalController of a node that no
  # longer gets one, before the new build starts.
  local name
  for name in $(nereid::process::names_besides_control_plane); do
    nereid::process::stop "${name}"
  done
  localrun start-globalmanager || exit 1
  localrun start-localcontrollers || exit 1
}

# realnode runs hack/realnode's command $1 with this run's flags.
realnode() {
  local cmd="$1"
  shift
  "${NEREID_OUT_DIR}/bin/realnode" "${cmd}" \
    --out-dir="${NEREID_OUT_DIR}" \
    --nodes="${REAL_NODES}" \
    --apiserver-port="${NEREID_APISERVER_PORT}" \
    --bin-dir="${BIN}" \
    --ready-timeout="${READY_TIMEOUT}s" "$@"
}

# prepare_real_nodes builds hack/realnode and has it make the API server's flags for
# real nodes. A running API server started for the other kind of run (with or without
# real nodes) would not reach them, or would advertise an address no one serves: it
# must be stopped first.
prepare_real_nodes() {
  local pid has_egress=0
  if pid="$(nereid::process::pid kube-apiserver)"; then
    tr '\0' '\n' <"/proc/${pid}/cmdline" | grep -q '^--egress-selector-config-file=' && has_egress=1
    if [[ -n "${REAL_NODES}" && "${has_egress}" == 0 ]] || [[ -z "${REAL_NODES}" && "${has_egress}" == 1 ]]; then
      nereid::fatal "the control plane in ${NEREID_OUT_DIR} runs $([[ "${has_egress}" == 1 ]] && echo with || echo without) real nodes; stop it first (NEREID_OUT_DIR=${NEREID_OUT_DIR} hack/local-down.sh), then run again with NEREID_REAL_NODES=${NEREID_REAL_NODES:-0}"
    fi
  fi
  [[ -n "${REAL_NODES}" ]] || return 0
  ((EUID == 0)) || nereid::fatal "NEREID_REAL_NODES needs root (network and mount namespaces, cgroups, containerd); run as root or without it"
  (cd "${NEREID_ROOT}" && go build -o "${NEREID_OUT_DIR}/bin/" ./hack/realnode/cmd/realnode) ||
    nereid::fatal "building hack/realnode/cmd/realnode failed"
  mapfile -t REAL_APISERVER_FLAGS < <(realnode apiserver-flags) || nereid::fatal "realnode apiserver-flags failed"
}

# ensure_real_nodes brings the real nodes up (kept as they are when they run) and waits
# until each is Ready, labelled as an edge node.
ensure_real_nodes() {
  [[ -n "${REAL_NODES}" ]] || return 0
  nereid::log "bringing up real nodes: ${REAL_NODES}"
  local start=${SECONDS}
  # The GlobalManager runs in the real nodes' cluster network; the gateway forwards its
  # ports from the host's loopback, where kwok's nodes' LocalControllers and the demos
  # reach it.
  local reverse=""
  if [[ "${NEREID_GLOBALMANAGER:-1}" != "0" ]]; then
    reverse="${NEREID_RESERVED_PORT_FIRST},$((NEREID_RESERVED_PORT_FIRST + 1))"
    ((NEREID_DI_SERVER_PORT == 0)) || reverse+=",${NEREID_DI_SERVER_PORT}"
    ((NEREID_DI_V1_SERVER_PORT == 0)) || reverse+=",${NEREID_DI_V1_SERVER_PORT}"
  fi
  realnode up --install --labels="nereid.io/real-node=true" --edge-nodes="${REAL_EDGE_NODES}" --reverse-ports="${reverse}" ||
    nereid::fatal "the real nodes did not come up (their logs: ${NEREID_OUT_DIR}/logs/real-*.log)"
  nereid::log "real nodes Ready in $((SECONDS - start))s: ${REAL_NODES}"
  if [[ "${NEREID_GLOBALMANAGER:-1}" != "0" ]]; then
    # The chart's LocalController DaemonSet runs on them, from its image.
    NEREID_IMAGE_ARCHIVES=1 NEREID_IMAGE_DIR="${NEREID_OUT_DIR}/images" bash "${NEREID_ROOT}/hack/images.sh" ||
      nereid::fatal "building Nereid's images for the real nodes failed"
    realnode import "${NEREID_OUT_DIR}"/images/*.tar || nereid::fatal "importing Nereid's images into the real nodes failed"
  fi
}

main() {
  nereid::require_cmd curl openssl setsid base64 awk sed
  delete_delay_ms >/dev/null # validate before doing anything

  if [[ -z "${NEREID_SKIP_BUILD:-}" ]]; then
    # Only what the control plane runs: helm, for the chart's tests, is
    # built by make test (make tools).
    local real_tools=()
    [[ -z "${REAL_NODES}" ]] || real_tools=(kubelet kube-proxy coredns helm)
    "${NEREID_ROOT}/hack/build-tools.sh" "${NEREID_COMPONENTS[@]}" kubectl "${real_tools[@]}"
  fi
  local c
  for c in "${NEREID_COMPONENTS[@]}" kubectl; do
    [[ -x "${BIN}/${c}" ]] || nereid::fatal "${BIN}/${c} is missing; run hack/build-tools.sh"
  done

  nereid::ports::init
  check_port_base
  mkdir -p "${NEREID_OUT_DIR}/bin"
  nereid::pki::ensure
  prepare_real_nodes

  local running=0
  for c in "${NEREID_COMPONENTS[@]}"; do
    if nereid::process::running "${c}" && healthy "${c}"; then
      running=$((running + 1))
    fi
  done
  if ((running == ${#NEREID_COMPONENTS[@]})); then
    nereid::log "local control plane already up in ${NEREID_OUT_DIR}"
    install_crds
    register_nodes
    ensure_real_nodes
    ensure_nereid
    print_usage_hint
    return
  fi
  if ((running > 0)); then
    nereid::log "local control plane partly up (${running}/${#NEREID_COMPONENTS[@]} components); starting what is missing"
  fi

  # Every port we are about to bind must be free before anything starts, so a clash
  # fails at once, not halfway.
  for c in "${NEREID_COMPONENTS[@]}"; do
    nereid::process::running "${c}" || nereid::ports::check_free "${c}"
  done

  local start=${SECONDS}
  mkdir -p "${NEREID_OUT_DIR}"/{logs,pids,kubeconfigs}
  nereid::pki::kubeconfig admin "${KUBECONFIG_ADMIN}"
  for c in kube-controller-manager kube-scheduler kwok; do
    nereid::pki::kubeconfig "${c}" "$(component_kubeconfig "${c}")"
  done
  write_env_file

  for c in "${NEREID_COMPONENTS[@]}"; do
    ensure_component "${c}"
  done
  install_crds
  register_nodes
  wait_for_default_service_account
  nereid::log "control plane ready in $((SECONDS - start))s"
  ensure_real_nodes
  ensure_nereid
  print_usage_hint
}

main "$@"
