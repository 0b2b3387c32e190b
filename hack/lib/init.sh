# shellcheck shell=bash
# Shared setup for the hack/ scripts: where things live, and how to talk to the user.
# Source it; it defines variables and functions and runs nothing else.
#
#   NEREID_ROOT       absolute path of the repository
#   NEREID_CACHE_DIR  built tools (default <repo>/.cache); binaries in $NEREID_CACHE_DIR/bin
#   NEREID_OUT_DIR    state of one local control plane (default <repo>/_output/local)

NEREID_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
export NEREID_ROOT

# nereid::abspath prints PATH made absolute (relative to the current directory) without
# requiring it to exist, so that a relative NEREID_OUT_DIR names one place for every
# later command and the port checksum sees the same string every time.
nereid::abspath() {
  local p="$1"
  case "${p}" in
    /*) ;;
    *) p="${PWD}/${p}" ;;
  esac
  # Drop trailing slashes and "/./" so two spellings of one path hash alike.
  while [[ "${p}" == */ && "${p}" != "/" ]]; do p="${p%/}"; done
  p="${p//\/.\//\/}"
  printf '%s\n' "${p}"
}

NEREID_CACHE_DIR="$(nereid::abspath "${NEREID_CACHE_DIR:-${NEREID_ROOT}/.cache}")"
NEREID_BIN_DIR="${NEREID_CACHE_DIR}/bin"
NEREID_OUT_DIR="$(nereid::abspath "${NEREID_OUT_DIR:-${NEREID_ROOT}/_output/local}")"
export NEREID_CACHE_DIR NEREID_BIN_DIR NEREID_OUT_DIR

# The components of the control plane, in start order; they are stopped in reverse.
# shellcheck disable=SC2034 # used by the scripts that source this file
NEREID_COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)

# Messages go to stderr so that a caller capturing stdout gets only data.
nereid::log() {
  printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2
}

nereid::warn() {
  printf '%s WARNING: %s\n' "$(date +%H:%M:%S)" "$*" >&2
}

# nereid::fatal prints an error and exits non-zero; use it for every expected failure so
# the user reads a sentence, not a bash trace.
nereid::fatal() {
  printf '%s ERROR: %s\n' "$(date +%H:%M:%S)" "$*" >&2
  exit 1
}

# nereid::require_cmd fails readably when a host command the scripts rely on is missing.
nereid::require_cmd() {
  local cmd
  for cmd in "$@"; do
    command -v "${cmd}" >/dev/null 2>&1 || nereid::fatal "'${cmd}' is required but not on PATH"
  done
}
