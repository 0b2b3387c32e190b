#!/usr/bin/env bash
# Runs jobs for real on the local run's real nodes (NEREID_REAL_NODES=2 make local-up):
#
#   1. Sedna's federated learning sample (examples/real-nodes/), its aggregation server
#      on real-cloud-0 and its trainers on real-0 and real-1, Sedna's own library in
#      the worker image (hack/workerimage), each trainer on 300 rows of its node's own
#      Dataset file; it prints the rounds as Sedna's trainers logged them, what Sedna's
#      aggregator logged, and the job's status.
#   2. DI-orchestrator's mock of DI-engine, its di-mock-dijob.yaml and di-mock-agconfig.yaml
#      as `realnode di-mock-job` runs them here (pull policy IfNotPresent, pods on the real
#      nodes, and the mock's own learner aggregator beside its coordinator: the mock's
#      coordinator waits for one at KUBERNETES_AGGREGATOR_URL, which DI-orchestrator
#      v0.2.2 never set; see docs/local-run.md#real-nodes), in hack/workerimage's di-mock
#      image under the name the file gives; it prints the coordinator's dialogue with the
#      v1 replicas server and the DIJob's phase until it is Succeeded.
#
# Usage: hack/demo-real.sh   (make demo-real)
# Env:   NEREID_OUT_DIR (default _output/local), NEREID_SHARED_DIR (default ../shared:
#        Sedna's library and DI-orchestrator's mock, which the worker image holds)
set -euo pipefail

# shellcheck source=hack/lib/init.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"
# shellcheck source=hack/lib/workerimages.sh
source "${NEREID_ROOT}/hack/lib/workerimages.sh"

env_file="${NEREID_OUT_DIR}/env.sh"
[[ -f "${env_file}" ]] || nereid::fatal "no local run in ${NEREID_OUT_DIR}: run NEREID_REAL_NODES=2 make local-up first"
# shellcheck source=/dev/null
source "${env_file}"
for n in real-cloud-0 real-0 real-1; do
  [[ " ${NEREID_REAL_NODES:-} " == *" ${n} "* ]] ||
    nereid::fatal "the local run in ${NEREID_OUT_DIR} has no real node ${n}: make local-down, then NEREID_REAL_NODES=2 make local-up"
done
shared="$(nereid::shared_dir)"
nereid::shared_has_workers ||
  nereid::fatal "Sedna's library and DI-orchestrator's mock are not in ${shared} (NEREID_SHARED_DIR)"

k() { "${NEREID_BIN_DIR}/kubectl" --kubeconfig "${KUBECONFIG}" "$@"; }
readonly NS=demo-real

nereid::log "building the worker image (Sedna's library on Debian's python3) and DI-orchestrator's mock's, and importing them into the real nodes"
nereid::worker_archives "${NEREID_OUT_DIR}/images"
"${NEREID_OUT_DIR}/bin/realnode" import --out-dir="${NEREID_OUT_DIR}" "${NEREID_OUT_DIR}/images/worker.tar" "${NEREID_OUT_DIR}/images/di-mock.tar"

# rows NODE SEED writes 300 rows "x1,x2,label" of two Gaussian clouds into the node's
# own /data/fl/train.txt.
rows() {
  local file="${NEREID_OUT_DIR}/real/nodes/$1/root/data/fl/train.txt"
  mkdir -p "$(dirname "${file}")"
  awk -v seed="$2" 'BEGIN { srand(seed); pi = atan2(0, -1)
    for (i = 0; i < 300; i++) { l = i % 2; c = l ? 1.5 : -1.5
      g1 = sqrt(-2 * log(1 - rand())) * cos(2 * pi * rand()); g2 = sqrt(-2 * log(1 - rand())) * cos(2 * pi * rand())
      printf "%.4f,%.4f,%d\n", c + g1, c + g2, l } }' >"${file}"
}
rows real-0 1
rows real-1 2

nereid::log "federated learning: applying examples/real-nodes/ in namespace ${NS}"
k create namespace "${NS}" --dry-run=client -o yaml | k apply -f - >/dev/null
k delete federatedlearningjob -n "${NS}" surface-defect-detection --ignore-not-found --wait=true >/dev/null
k apply -n "${NS}" -f "${NEREID_ROOT}/examples/real-nodes/federatedlearningjob.yaml"
k wait -n "${NS}" federatedlearningjob/surface-defect-detection --for=jsonpath='{.status.phase}'=Succeeded --timeout=240s ||
  nereid::fatal "the federated job did not succeed: kubectl describe fl -n ${NS} surface-defect-detection"
printf '\n== the rounds, as Sedna'"'"'s trainers logged them\n'
k logs -n "${NS}" -l nereid.io/worker-role=training --prefix --tail=-1 | grep -E 'round|trained on|exit training' | sed 's/\x1b\[[0-9;]*m//g'
printf '\n== Sedna'"'"'s aggregation server\n'
k logs -n "${NS}" -l nereid.io/worker-role=aggregation --tail=-1 | grep -E 'Uvicorn running|client|Client' | sed 's/\x1b\[[0-9;]*m//g'
printf '\n'
k get federatedlearningjob -n "${NS}" surface-defect-detection
k get federatedlearningjob -n "${NS}" surface-defect-detection -o jsonpath='{range .status.edgeNodes[*]}{.name}: round {.round}, {.reportsApplied} reports, {.state}{"\n"}{end}'

nereid::log "DIJob v1alpha1: DI-orchestrator's di-mock-dijob.yaml in namespace default (the mock names default)"
"${NEREID_OUT_DIR}/bin/realnode" di-mock-job "${shared}/di-compat/v1alpha1/di-mock/di-mock-dijob.yaml" >"${NEREID_OUT_DIR}/di-mock-dijob.yaml"
k apply -f "${shared}/di-compat/v1alpha1/di-mock/di-mock-agconfig.yaml"
k delete dijobs.v1alpha1.diengine.opendilab.org -n default dijob-example --ignore-not-found --wait=true >/dev/null
k apply -n default -f "${NEREID_OUT_DIR}/di-mock-dijob.yaml"
for _ in $(seq 1 18); do
  sleep 10
  k get dijobs.v1alpha1.diengine.opendilab.org -n default dijob-example --no-headers 2>/dev/null | sed 's/^/  /'
  phase="$(k get dijobs.v1alpha1.diengine.opendilab.org -n default dijob-example -o jsonpath='{.status.phase}' 2>/dev/null || true)"
  [[ "${phase}" == Succeeded || "${phase}" == Failed ]] && break
done
printf '\n== the mock coordinator and the v1 replicas server\n'
k logs -n default dijob-example-coordinator -c di-container 2>/dev/null |
  grep -E 'aggregator|replicas response|Have connected|send delete|converged' | cut -c1-300 || true
k get pods -n default -o wide -l dijob-name=dijob-example
[[ "${phase}" == Succeeded ]] ||
  nereid::fatal "the DIJob is ${phase:-not done} after 3 minutes: kubectl describe dijobs.v1alpha1.diengine.opendilab.org -n default dijob-example"
printf '\nThe DIJob stays (kubectl get dijobs.v1alpha1.diengine.opendilab.org -n default); delete it with\n  kubectl delete dijobs.v1alpha1.diengine.opendilab.org -n default dijob-example\n'
