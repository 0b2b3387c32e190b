# shellcheck shell=bash
# The worker images the real nodes' jobs run, as image archives. Source hack/lib/init.sh
# first.

# nereid::shared_dir prints where ../shared is: Sedna's library and DI-orchestrator's
# mock (NEREID_SHARED_DIR, default the folder beside the repository).
nereid::shared_dir() {
  printf '%s\n' "${NEREID_SHARED_DIR:-$(dirname "${NEREID_ROOT}")/shared}"
}

# nereid::shared_has_workers succeeds when ../shared (nereid::shared_dir) holds what the
# worker images are made of: Sedna's library and DI-orchestrator's mock.
nereid::shared_has_workers() {
  local shared
  shared="$(nereid::shared_dir)"
  [[ -d "${shared}/sedna-compat/lib/sedna" && -d "${shared}/di-compat/v1alpha1/di-mock" ]]
}

# nereid::worker_archives OUT writes hack/workerimage's two images into folder OUT: the
# worker image (Sedna's library and its requirements from Debian's packages, Nereid's
# worker roles) as worker.tar, and DI-orchestrator's mock of DI-engine as di-mock.tar.
# It needs root, mmdebstrap (the Debian root filesystems, kept in the tools' cache) and
# ../shared (nereid::shared_dir); a failure is fatal.
nereid::worker_archives() {
  local out="$1" shared
  shared="$(nereid::shared_dir)"
  (cd "${NEREID_ROOT}" &&
    go run ./hack/workerimage -image worker -sedna "${shared}/sedna-compat" -py test/sednalib/py \
      -cache "${NEREID_CACHE_DIR}/images" -o "${out}/worker.tar") ||
    nereid::fatal "writing the worker image failed (its output is above)"
  (cd "${NEREID_ROOT}" &&
    go run ./hack/workerimage -image di-mock -di-mock "${shared}/di-compat/v1alpha1/di-mock" \
      -cache "${NEREID_CACHE_DIR}/images" -o "${out}/di-mock.tar") ||
    nereid::fatal "writing DI-orchestrator's mock's image failed (its output is above)"
}
