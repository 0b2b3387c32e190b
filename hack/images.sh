#!/usr/bin/env bash
# Builds the container images of the GlobalManager and the LocalController from
# build/docker/<binary>.Dockerfile, named as the Helm chart names them (values.yaml's
# registry and repository, the tag defaulting to Chart.yaml's appVersion; read by
# hack/imagerefs, so the names live in the chart alone).
#
# With a working container engine (docker, or podman when docker does not answer;
# NEREID_CONTAINER_ENGINE picks one; a docker client whose daemon does not answer is no
# engine) it builds them from the Dockerfiles. Without one it builds each binary
# statically and writes its image as an archive, _output/images/<binary>.tar
# (hack/imagearchive: an OCI layout and a docker archive, the same image as the
# Dockerfile's minus distroless's files a static Nereid binary does not read), for
# `ctr -n k8s.io images import` on a node or `docker load` elsewhere; and, where it can,
# the worker images the real nodes' jobs run (worker_archives, hack/workerimage). Pushing
# (NEREID_IMAGE_PUSH=1) needs an engine: without one it says so and exits 1.
#
# No image is published: the chart's default names (ghcr.io/nereid-ml/...) are where
# a release would go, and nothing pushes there. NEREID_IMAGE_REGISTRY names the images
# in a registry of yours instead (as the chart names them with
# --set globalManager.image.registry=... --set localController.image.registry=...), and
# NEREID_IMAGE_PUSH=1 pushes them there once built.
#
# Usage: hack/images.sh
# Env:   NEREID_CONTAINER_ENGINE   docker or podman (default: the first that works)
#        NEREID_IMAGE_REGISTRY     registry of both images (default: values.yaml's)
#        NEREID_IMAGE_PUSH         1: push the images after building them
#        NEREID_VERSION            the binaries' --version (default: git describe; hack/lib/version.sh)
#        NEREID_IMAGE_ARCHIVES=1   write the archives even where an engine works (the local
#                                  run's real nodes import them: hack/realnode)
#        NEREID_IMAGE_DIR          where the archives go (default _output/images)
set -euo pipefail

# shellcheck source=hack/lib/init.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"
# shellcheck source=hack/lib/version.sh
source "${NEREID_ROOT}/hack/lib/version.sh"
# shellcheck source=hack/lib/workerimages.sh
source "${NEREID_ROOT}/hack/lib/workerimages.sh"

nereid::require_cmd go

# engine prints the first container engine whose `info` succeeds; it fails with the
# reason of each candidate when none does.
engine() {
  local candidates=(docker podman) c out reasons=()
  if [[ -n "${NEREID_CONTAINER_ENGINE:-}" ]]; then
    candidates=("${NEREID_CONTAINER_ENGINE}")
  fi
  for c in "${candidates[@]}"; do
    if ! command -v "${c}" >/dev/null 2>&1; then
      reasons+=("${c}: not installed")
      continue
    fi
    if out="$("${c}" info 2>&1)"; then
      printf '%s\n' "${c}"
      return 0
    fi
    reasons+=("${c}: '${c} info' failed: $(printf '%s' "${out}" | tail -n 1)")
  done
  printf '%s\n' "${reasons[@]}" >&2
  return 1
}

# archives REFS writes each image of REFS ("binary ref" lines) as an archive under
# _output/images, from a static build of its binary.
archives() {
  local refs="$1" out="${NEREID_IMAGE_DIR:-${NEREID_ROOT}/_output/images}" binary ref
  mkdir -p "${out}"
  nereid::log "writing the images as archives under ${out}"
  while read -r binary ref; do
    # Static, and built as make builds everything (CGO_ENABLED=0, no -trimpath: that flag
    # changes every package's build cache key), so the packages local-up and the tests
    # compiled are reused.
    CGO_ENABLED=0 go build -ldflags="-s -w $(nereid::version::ldflags)" -o "${out}/${binary}" "./cmd/${binary}" ||
      nereid::fatal "building ${binary} failed (its output is above)"
    go run ./hack/imagearchive/cmd/imagearchive -binary "${out}/${binary}" -ref "${ref}" -o "${out}/${binary}.tar" ||
      nereid::fatal "writing the archive of ${ref} failed (its output is above)"
    rm -f "${out}/${binary}"
    nereid::log "wrote ${ref} as ${out}/${binary}.tar (ctr -n k8s.io images import ${out}/${binary}.tar)"
  done <<<"${refs}"
}

# worker_archives writes hack/workerimage's images as archives beside the others: the
# worker image (Sedna's library and its requirements from Debian's packages, Nereid's
# worker roles) and DI-orchestrator's mock of DI-engine, which the real nodes' jobs run
# (make demo-real, test/e2e). They need root and mmdebstrap (a Debian root filesystem,
# kept in the tools' cache) and ../shared's Sedna library and DI mock (NEREID_SHARED_DIR);
# without them it says so and writes none.
worker_archives() {
  local out="${NEREID_IMAGE_DIR:-${NEREID_ROOT}/_output/images}" shared
  shared="$(nereid::shared_dir)"
  if [[ "$(id -u)" != 0 ]] || ! command -v mmdebstrap >/dev/null 2>&1 || ! nereid::shared_has_workers; then
    nereid::log "not writing the worker images (hack/workerimage): they need root, mmdebstrap (apt-get install mmdebstrap) and Sedna's library and DI-orchestrator's mock in ${shared} (NEREID_SHARED_DIR)"
    return 0
  fi
  nereid::worker_archives "${out}"
  nereid::log "wrote the worker images as ${out}/worker.tar and ${out}/di-mock.tar"
}

main() {
  cd "${NEREID_ROOT}"
  local eng refs go_version binary ref
  refs="$(go run ./hack/imagerefs -chart build/charts/nereid -registry "${NEREID_IMAGE_REGISTRY:-}")" ||
    nereid::fatal "cannot read the image names from build/charts/nereid"
  if [[ "${NEREID_IMAGE_ARCHIVES:-}" == 1 && "${NEREID_IMAGE_PUSH:-}" != 1 ]]; then
    archives "${refs}"
    return
  fi
  if ! eng="$(engine)"; then
    nereid::log "no container engine works here"
    if [[ "${NEREID_IMAGE_PUSH:-}" == "1" ]]; then
      nereid::fatal "no container engine works here to push with, so nothing was pushed (the images would be: $(cut -d' ' -f2 <<<"${refs}" | paste -sd' ')). Run make images PUSH=1 where docker or podman runs."
    fi
    archives "${refs}"
    worker_archives
    return
  fi
  go_version="$(go list -m -f '{{.GoVersion}}')"
  while read -r binary ref; do
    nereid::log "building ${ref} with ${eng} from build/docker/${binary}.Dockerfile"
    "${eng}" build -f "build/docker/${binary}.Dockerfile" --build-arg "GO_VERSION=${go_version}" \
      --build-arg "VERSION=$(nereid::version::get)" --build-arg "COMMIT=$(nereid::version::commit)" -t "${ref}" . ||
      nereid::fatal "${eng} build of ${ref} failed (its output is above)"
  done <<<"${refs}"
  nereid::log "built: $(cut -d' ' -f2 <<<"${refs}" | paste -sd' ')"
  if [[ "${NEREID_IMAGE_PUSH:-}" == "1" ]]; then
    while read -r binary ref; do
      nereid::log "pushing ${ref}"
      "${eng}" push "${ref}" || nereid::fatal "${eng} push of ${ref} failed (its output is above)"
    done <<<"${refs}"
  fi
}

main "$@"
