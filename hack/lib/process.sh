# shellcheck shell=bash
# Starting, finding and stopping the long-running processes of one local control plane.
# Source hack/lib/init.sh first.
#
# Each process is recorded in $NEREID_OUT_DIR/pids/<name>.pid and logs to
# $NEREID_OUT_DIR/logs/<name>.log. It runs in its own session (setsid), so it outlives
# the script that started it and a Ctrl-C in that terminal does not reach it, and its
# process group can be signalled as a whole. Its environment carries
# NEREID_LOCAL_CLUSTER=<out dir>: that marks it as ours, which guards against a stale pid
# file naming a reused pid, and lets local-down.sh find a process whose pid file is lost.
# Nereid's GlobalManager and LocalControllers are started by hack/localrun (package
# hack/localrun, Process.StartDetached), which keeps the same convention, so that
# local-down.sh stops them the same way.

nereid::process::pid_file() { printf '%s/pids/%s.pid\n' "${NEREID_OUT_DIR}" "$1"; }
nereid::process::log_file() { printf '%s/logs/%s.log\n' "${NEREID_OUT_DIR}" "$1"; }

# nereid::process::state PID prints PID's state (/proc/PID/stat) and succeeds when it is
# alive: a zombie still has a /proc entry, but is gone for our purposes.
nereid::process::state() {
  local state
  state="$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null || true)"
  printf '%s\n' "${state}"
  [[ -n "${state}" && "${state}" != "Z" && "${state}" != "X" ]]
}

# nereid::process::is_ours PID [TRIES] succeeds when PID is alive (not a zombie) and was
# started for this out dir. A process that is exec'ing (setsid into the component, say)
# shows an environment without the marker for a moment: seen in make test, a
# kube-apiserver running, state R, was taken for gone. With TRIES (default 1) the marker
# is read that many times, 0.1 s apart, before a live process is called not ours; the
# scan of every process (strays) reads once.
nereid::process::is_ours() {
  local pid="$1" tries="${2:-1}" i
  [[ "${pid}" =~ ^[0-9]+$ ]] || return 1
  for ((i = 0; i < tries; i++)); do
    ((i == 0)) || sleep 0.1
    [[ -r "/proc/${pid}/environ" ]] || return 1
    nereid::process::state "${pid}" >/dev/null || return 1
    # Kernel threads and processes exiting under us fail the read; they are not ours.
    if { tr '\0' '\n' <"/proc/${pid}/environ"; } 2>/dev/null | grep -qxF "NEREID_LOCAL_CLUSTER=${NEREID_OUT_DIR}"; then
      return 0
    fi
  done
  return 1
}

# nereid::process::pid prints the recorded pid of NAME if that process is still ours and
# alive, and fails otherwise.
nereid::process::pid() {
  local file pid
  file="$(nereid::process::pid_file "$1")"
  [[ -f "${file}" ]] || return 1
  pid="$(<"${file}")"
  nereid::process::is_ours "${pid}" 5 || return 1
  printf '%s\n' "${pid}"
}

nereid::process::running() { nereid::process::pid "$1" >/dev/null; }

# nereid::process::start NAME CMD [ARGS...] starts CMD in the background, detached, and
# records its pid. Output is appended to the log so a restart keeps the earlier run.
nereid::process::start() {
  local name="$1" log pid
  shift
  log="$(nereid::process::log_file "${name}")"
  mkdir -p "${NEREID_OUT_DIR}/pids" "${NEREID_OUT_DIR}/logs"
  printf '=== %s starting %s: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "${name}" "$*" >>"${log}"
  # This shell runs without job control, so the background child is not a process-group
  # leader and setsid(1) calls setsid() in place instead of forking: $! stays the pid of
  # the final process. stdin/stdout/stderr are redirected so that no caller (a `go test`
  # reading our output through a pipe, say) waits on a descriptor the daemon holds.
  NEREID_LOCAL_CLUSTER="${NEREID_OUT_DIR}" setsid "$@" </dev/null >>"${log}" 2>&1 &
  pid=$!
  printf '%s\n' "${pid}" >"$(nereid::process::pid_file "${name}")"
  # Until the forked shell has exec'd the command its environment lacks the marker,
  # and a check right now would take it for gone; on a loaded machine that takes a
  # while. Wait (at most 10 s) until it is ours or has really exited.
  local i
  for ((i = 0; i < 100; i++)); do
    nereid::process::is_ours "${pid}" && return 0
    kill -0 "${pid}" 2>/dev/null || return 0
    sleep 0.1
  done
}

# nereid::process::log_tail prints the last lines of NAME's log, indented.
nereid::process::log_tail() {
  local log
  log="$(nereid::process::log_file "$1")"
  if [[ -s "${log}" ]]; then
    printf -- '--- last %s lines of %s ---\n' "${2:-20}" "${log}" >&2
    tail -n "${2:-20}" "${log}" | sed 's/^/    /' >&2
    printf -- '---\n' >&2
  fi
}

# nereid::process::fail_component reports that NAME did not come up, with its log, and exits.
nereid::process::fail_component() {
  local name="$1" reason="$2"
  printf '%s ERROR: %s %s\n' "$(date +%H:%M:%S)" "${name}" "${reason}" >&2
  printf '  log: %s\n' "$(nereid::process::log_file "${name}")" >&2
  nereid::process::log_tail "${name}" 20
  printf '  stop what is left with: NEREID_OUT_DIR=%s %s/hack/local-down.sh\n' "${NEREID_OUT_DIR}" "${NEREID_ROOT}" >&2
  exit 1
}

# nereid::process::wait_ready NAME TIMEOUT_SECONDS WHAT CMD [ARGS...] polls CMD until it
# succeeds. It fails early, with the log, when NAME's process exits, and after
# TIMEOUT_SECONDS. WHAT says what is being waited for, for the messages.
nereid::process::wait_ready() {
  local name="$1" timeout="$2" what="$3"
  shift 3
  local deadline=$((SECONDS + timeout))
  while true; do
    if "$@" >/dev/null 2>&1; then
      return 0
    fi
    if ! nereid::process::running "${name}"; then
      nereid::process::ended "${name}"
      nereid::process::fail_component "${name}" "exited before ${what} (${NEREID_ENDED})"
    fi
    if ((SECONDS >= deadline)); then
      nereid::process::fail_component "${name}" "not ready after ${timeout}s (waiting for ${what})"
    fi
    sleep 0.5
  done
}

# nereid::process::ended NAME says in NEREID_ENDED how NAME's recorded process ended, for
# a message: its exit status or signal when this shell started it (nereid::process::start
# in this shell: `wait` reaps it), that it is still running but no longer looks ours (its
# environment could not be read), or that nothing more is known.
nereid::process::ended() {
  local pid="" state rc=0
  pid="$(cat "$(nereid::process::pid_file "$1")" 2>/dev/null || true)"
  if [[ ! "${pid}" =~ ^[0-9]+$ ]]; then
    NEREID_ENDED="no pid recorded"
  elif state="$(nereid::process::state "${pid}")"; then
    NEREID_ENDED="pid ${pid} is running, state ${state}, but its environment lacks NEREID_LOCAL_CLUSTER=${NEREID_OUT_DIR}"
  else
    wait "${pid}" 2>/dev/null || rc=$?
    if ((rc == 127)); then
      NEREID_ENDED="pid ${pid} is gone; its exit status is unknown here"
    elif ((rc > 128)); then
      NEREID_ENDED="pid ${pid} was killed by signal $((rc - 128))"
    else
      NEREID_ENDED="pid ${pid} exited with status ${rc}"
    fi
  fi
}

# nereid::process::stop NAME stops the recorded process group of NAME: TERM, then KILL
# after NEREID_STOP_TIMEOUT seconds (default 10). It removes the pid file either way.
nereid::process::stop() {
  local name="$1" pid file
  file="$(nereid::process::pid_file "${name}")"
  if pid="$(nereid::process::pid "${name}")"; then
    nereid::log "stopping ${name} (pid ${pid})"
    nereid::process::kill_group "${pid}"
  fi
  rm -f "${file}"
}

# nereid::process::kill_group PID signals PID's process group (it is a session leader,
# so its children go too), waits, and escalates to KILL.
nereid::process::kill_group() {
  local pid="$1" timeout="${NEREID_STOP_TIMEOUT:-10}" deadline
  kill -TERM -- "-${pid}" 2>/dev/null || kill -TERM "${pid}" 2>/dev/null || true
  deadline=$((SECONDS + timeout))
  while nereid::process::is_ours "${pid}" && ((SECONDS < deadline)); do
    sleep 0.2
  done
  if nereid::process::is_ours "${pid}"; then
    nereid::warn "pid ${pid} did not exit ${timeout}s after TERM; sending KILL"
    kill -KILL -- "-${pid}" 2>/dev/null || kill -KILL "${pid}" 2>/dev/null || true
    deadline=$((SECONDS + 5))
    while nereid::process::is_ours "${pid}" && ((SECONDS < deadline)); do
      sleep 0.2
    done
  fi
}

# nereid::process::names_besides_control_plane prints the names of the recorded processes
# that are not the control plane's (NEREID_COMPONENTS) nor the real nodes': Nereid's
# GlobalManager and LocalControllers, which hack/localrun starts.
nereid::process::names_besides_control_plane() {
  local f name
  for f in "${NEREID_OUT_DIR}"/pids/*.pid; do
    [[ -e "${f}" ]] || continue
    name="$(basename "${f}" .pid)"
    # The real nodes' processes (real-*) are hack/realnode's to stop, with their
    # containers: see local-down.sh.
    [[ " ${NEREID_COMPONENTS[*]} " == *" ${name} "* || "${name}" == real-* ]] || printf '%s\n' "${name}"
  done
}

# nereid::process::strays prints the pids of processes marked as ours that no pid file
# names (a crashed script, a deleted pid file), so local-down.sh leaves nothing behind.
nereid::process::strays() {
  local env pid
  for env in /proc/[0-9]*/environ; do
    pid="${env#/proc/}"
    pid="${pid%/environ}"
    [[ "${pid}" != "$$" && "${pid}" != "${BASHPID}" ]] || continue
    nereid::process::is_ours "${pid}" && printf '%s\n' "${pid}"
  done
  return 0
}
