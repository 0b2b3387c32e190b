# shellcheck shell=bash
# Port allocation for one local control plane. Source hack/lib/init.sh first.
#
# Every out dir gets a block of 20 consecutive loopback ports. The base is
# NEREID_PORT_BASE when set, otherwise derived from a checksum of the absolute out-dir
# path into 20000..29980 in steps of 20, so two checkouts, or a test run beside a demo
# (different out dirs), get different blocks without anyone choosing. The range stays
# below Linux's ephemeral range (32768+) so outgoing connections never take our ports.
# The tests' framework.FreePort (test/framework/edge.go) hands out 12000..19999, below
# these blocks.
#
# Offsets in the block:
#    0 etcd client          1 etcd peer
#    2 kube-apiserver       3 kube-controller-manager (secure, /healthz)
#    4 kube-scheduler (secure, /healthz)
#    5 kwok server (/healthz; the simulated kubelets' endpoint)
#    6 the GlobalManager's DIJob replicas API (v2alpha1; NEREID_DI_SERVER_PORT
#      overrides it, 0 serves none)
#    7 its replicas server of v1alpha1 DIJobs' coordinators (NEREID_DI_V1_SERVER_PORT
#      overrides it, 0 serves none)
#    8-9 spare
#   10-19 reserved for Nereid's own processes (GlobalManager, LocalControllers)

readonly NEREID_PORT_RANGE_FIRST=20000
readonly NEREID_PORT_BLOCKS=500
readonly NEREID_PORT_BLOCK_SIZE=20

# nereid::ports::base prints the first port of this out dir's block.
nereid::ports::base() {
  if [[ -n "${NEREID_PORT_BASE:-}" ]]; then
    if ! [[ "${NEREID_PORT_BASE}" =~ ^[0-9]+$ ]] ||
      ((NEREID_PORT_BASE < 1024 || NEREID_PORT_BASE > 65535 - NEREID_PORT_BLOCK_SIZE)); then
      nereid::fatal "NEREID_PORT_BASE=${NEREID_PORT_BASE} is not a port number between 1024 and $((65535 - NEREID_PORT_BLOCK_SIZE))"
    fi
    printf '%s\n' "${NEREID_PORT_BASE}"
    return
  fi
  local sum
  sum="$(printf '%s' "${NEREID_OUT_DIR}" | cksum | cut -d' ' -f1)"
  printf '%s\n' "$((NEREID_PORT_RANGE_FIRST + (sum % NEREID_PORT_BLOCKS) * NEREID_PORT_BLOCK_SIZE))"
}

# nereid::ports::init sets the NEREID_*_PORT variables from the base.
# shellcheck disable=SC2034 # used by the scripts that source this file
nereid::ports::init() {
  NEREID_PORT_BASE="$(nereid::ports::base)"
  NEREID_ETCD_PORT=$((NEREID_PORT_BASE + 0))
  NEREID_ETCD_PEER_PORT=$((NEREID_PORT_BASE + 1))
  NEREID_APISERVER_PORT=$((NEREID_PORT_BASE + 2))
  NEREID_KCM_PORT=$((NEREID_PORT_BASE + 3))
  NEREID_SCHEDULER_PORT=$((NEREID_PORT_BASE + 4))
  NEREID_KWOK_PORT=$((NEREID_PORT_BASE + 5))
  NEREID_DI_SERVER_PORT="${NEREID_DI_SERVER_PORT:-$((NEREID_PORT_BASE + 6))}"
  if ! [[ "${NEREID_DI_SERVER_PORT}" =~ ^[0-9]+$ ]] || ((NEREID_DI_SERVER_PORT > 65535)); then
    nereid::fatal "NEREID_DI_SERVER_PORT=${NEREID_DI_SERVER_PORT} is not a port number (0 serves no replicas API)"
  fi
  NEREID_DI_V1_SERVER_PORT="${NEREID_DI_V1_SERVER_PORT:-$((NEREID_PORT_BASE + 7))}"
  if ! [[ "${NEREID_DI_V1_SERVER_PORT}" =~ ^[0-9]+$ ]] || ((NEREID_DI_V1_SERVER_PORT > 65535)); then
    nereid::fatal "NEREID_DI_V1_SERVER_PORT=${NEREID_DI_V1_SERVER_PORT} is not a port number (0 serves no v1 replicas server)"
  fi
  NEREID_RESERVED_PORT_FIRST=$((NEREID_PORT_BASE + 10))
  NEREID_RESERVED_PORT_LAST=$((NEREID_PORT_BASE + 19))
}

# nereid::ports::of prints the ports COMPONENT listens on.
nereid::ports::of() {
  case "$1" in
    etcd) echo "${NEREID_ETCD_PORT} ${NEREID_ETCD_PEER_PORT}" ;;
    kube-apiserver) echo "${NEREID_APISERVER_PORT}" ;;
    kube-controller-manager) echo "${NEREID_KCM_PORT}" ;;
    kube-scheduler) echo "${NEREID_SCHEDULER_PORT}" ;;
    kwok) echo "${NEREID_KWOK_PORT}" ;;
    *) nereid::fatal "no ports known for component $1" ;;
  esac
}

# nereid::ports::in_use succeeds when something listens on 127.0.0.1:PORT (or on every
# address, which also blocks our bind).
nereid::ports::in_use() {
  local port="$1"
  if command -v ss >/dev/null 2>&1; then
    [[ -n "$(ss -Htln "sport = :${port}" 2>/dev/null)" ]]
  else
    # Without ss, a successful connect means a listener; bash's /dev/tcp needs no tool.
    (exec 3<>"/dev/tcp/127.0.0.1/${port}") 2>/dev/null
  fi
}

# nereid::ports::check_free fails, naming the port and the override, when a port that
# COMPONENT is about to bind is taken by a process that is not ours.
nereid::ports::check_free() {
  local component="$1" port owner
  for port in $(nereid::ports::of "${component}"); do
    if nereid::ports::in_use "${port}"; then
      owner=""
      if command -v ss >/dev/null 2>&1; then
        owner="$(ss -Htlnp "sport = :${port}" 2>/dev/null | grep -o 'users:.*' | head -n1 || true)"
      fi
      nereid::fatal "port ${port} (for ${component}, block ${NEREID_PORT_BASE}..$((NEREID_PORT_BASE + NEREID_PORT_BLOCK_SIZE - 1)) of ${NEREID_OUT_DIR}) is already in use${owner:+ by ${owner}}; stop that process, or choose another block with NEREID_PORT_BASE=<port> (a free range of ${NEREID_PORT_BLOCK_SIZE} ports), or use another NEREID_OUT_DIR"
    fi
  done
}
