#!/usr/bin/env bash
# Stops the local control plane of an out dir: every process recorded in
# $NEREID_OUT_DIR/pids/ (the control plane and anything else started through
# hack/lib/process.sh, such as the GlobalManager or LocalControllers), later components
# first. Each gets TERM, then KILL after NEREID_STOP_TIMEOUT seconds (default 10).
# Processes marked as belonging to the out dir whose pid file is gone are stopped too, so
# nothing is left behind. Running it again is harmless.
#
# Usage: hack/local-down.sh [--purge] [-h|--help]
#   --purge (or NEREID_PURGE=1)  also delete the state dir (etcd data, certs, logs)
# Environment: NEREID_OUT_DIR (default <repo>/_output/local), NEREID_STOP_TIMEOUT.
set -euo pipefail

# shellcheck source=hack/lib/init.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"
# shellcheck source=hack/lib/process.sh
source "${NEREID_ROOT}/hack/lib/process.sh"

purge="${NEREID_PURGE:-}"
[[ "${purge}" == 0 ]] && purge=""
for arg in "$@"; do
  case "${arg}" in
    --purge) purge=1 ;;
    -h | --help)
      sed -n '2,/^set -euo pipefail/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *) nereid::fatal "unknown argument: ${arg} (usage: hack/local-down.sh [--purge])" ;;
  esac
done

main() {
  if [[ ! -d "${NEREID_OUT_DIR}" ]]; then
    nereid::log "nothing to stop: ${NEREID_OUT_DIR} does not exist"
    return
  fi

  # Components that are not part of the control plane (GlobalManager, LocalControllers)
  # go first, while the apiserver can still take their last writes; then the real nodes,
  # with their containers, while it can still take their Node objects' deletion
  # (hack/realnode); then the control plane in reverse start order, etcd last.
  local name i
  for name in $(nereid::process::names_besides_control_plane); do
    nereid::process::stop "${name}"
  done
  if [[ -x "${NEREID_OUT_DIR}/bin/realnode" && -d "${NEREID_OUT_DIR}/real" ]]; then
    nereid::log "stopping the real nodes"
    "${NEREID_OUT_DIR}/bin/realnode" down --out-dir="${NEREID_OUT_DIR}" ||
      nereid::warn "realnode down failed (its output is above)"
  fi
  for ((i = ${#NEREID_COMPONENTS[@]} - 1; i >= 0; i--)); do
    nereid::process::stop "${NEREID_COMPONENTS[i]}"
  done

  local pid
  for pid in $(nereid::process::strays); do
    nereid::warn "stopping pid ${pid} ($(tr '\0' ' ' <"/proc/${pid}/cmdline" 2>/dev/null | cut -c1-120)), marked as ${NEREID_OUT_DIR}'s but recorded in no pid file"
    nereid::process::kill_group "${pid}"
  done

  if [[ -n "${purge}" ]]; then
    # Refuse paths whose removal could not be what anyone meant.
    case "${NEREID_OUT_DIR}" in
      / | "${HOME}" | "${NEREID_ROOT}") nereid::fatal "refusing to purge ${NEREID_OUT_DIR}" ;;
    esac
    nereid::log "removing ${NEREID_OUT_DIR}"
    rm -rf "${NEREID_OUT_DIR}"
  fi
  nereid::log "local control plane in ${NEREID_OUT_DIR} stopped"
}

main
