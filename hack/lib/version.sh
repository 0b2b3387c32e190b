# shellcheck shell=bash
# The version Nereid's binaries are stamped with, which their --version prints and
# their first log line says (pkg/version). The one place it is computed: the
# Makefile, hack/images.sh and hack/local-up.sh all ask here.
#
#   source hack/lib/version.sh      defines the functions below
#   bash hack/lib/version.sh        prints the version
#   bash hack/lib/version.sh --ldflags   prints the go build -ldflags that stamp it
#
# NEREID_VERSION and NEREID_COMMIT, when set, win (make VERSION=... sets the first).

_nereid_version_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"

# nereid::version::get prints `git describe --tags --always --dirty` of the checkout
# (a tag, or the commit, "-dirty" when it has changes), or "dev" outside git.
nereid::version::get() {
  if [[ -n "${NEREID_VERSION:-}" ]]; then
    printf '%s\n' "${NEREID_VERSION}"
    return
  fi
  git -C "${_nereid_version_root}" describe --tags --always --dirty 2>/dev/null || echo dev
}

# nereid::version::commit prints the checkout's commit, or "unknown" outside git.
nereid::version::commit() {
  if [[ -n "${NEREID_COMMIT:-}" ]]; then
    printf '%s\n' "${NEREID_COMMIT}"
    return
  fi
  git -C "${_nereid_version_root}" rev-parse --short=12 HEAD 2>/dev/null || echo unknown
}

# nereid::version::ldflags prints the -ldflags of a go build that stamps both.
nereid::version::ldflags() {
  local pkg=github.com/nereid-ml/nereid/pkg/version
  printf -- '-X %s.version=%s -X %s.commit=%s\n' \
    "${pkg}" "$(nereid::version::get)" "${pkg}" "$(nereid::version::commit)"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  set -euo pipefail
  case "${1:-}" in
    "") nereid::version::get ;;
    --ldflags) nereid::version::ldflags ;;
    *)
      echo "usage: $0 [--ldflags]" >&2
      exit 2
      ;;
  esac
fi
