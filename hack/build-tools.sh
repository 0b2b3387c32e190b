#!/usr/bin/env bash
# Builds the binaries of the local control plane from the pinned tool modules under
# hack/tools/ into "${NEREID_CACHE_DIR:-<repo>/.cache}/bin":
#
#   etcd                                   hack/tools/etcd  (go.etcd.io/etcd/server/v3)
#   kube-apiserver, kube-controller-manager,
#   kube-scheduler, kubectl                hack/tools/kube  (k8s.io/kubernetes)
#   kubelet, kube-proxy                    hack/tools/kube  (real nodes, hack/realnode)
#   coredns                                hack/tools/coredns (github.com/coredns/coredns)
#   kwok                                   hack/tools/kwok  (sigs.k8s.io/kwok)
#   helm                                   hack/tools/helm  (helm.sh/helm/v3)
#
# A binary is reused when present and its stamp matches: the stamp is a sha256 of the
# tool module's go.mod, go.sum and Go files plus the build recipe and the Go version, so
# bumping a pinned version rebuilds and nothing else does. The first build takes several
# minutes on 2 cores (compiling Kubernetes); later ones come from Go's build cache.
#
# Usage: hack/build-tools.sh [NAME...]   (default: all of the above)
# Env:   NEREID_CACHE_DIR   where bin/ goes (default <repo>/.cache)
#        NEREID_FORCE_BUILD=1  rebuild even when the stamp matches
set -euo pipefail

# shellcheck source=hack/lib/init.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"

# The tools are built with Go's default cgo setting, whatever make sets for Nereid's
# own builds (CGO_ENABLED=0): it is part of their stamps.
unset CGO_ENABLED

nereid::require_cmd go sha256sum

# name | tool module dir (under hack/tools) | package | module whose version is reported
readonly TOOLS=(
  "etcd|etcd|.|go.etcd.io/etcd/server/v3"
  "kube-apiserver|kube|k8s.io/kubernetes/cmd/kube-apiserver|k8s.io/kubernetes"
  "kube-controller-manager|kube|k8s.io/kubernetes/cmd/kube-controller-manager|k8s.io/kubernetes"
  "kube-scheduler|kube|k8s.io/kubernetes/cmd/kube-scheduler|k8s.io/kubernetes"
  "kubectl|kube|k8s.io/kubernetes/cmd/kubectl|k8s.io/kubernetes"
  "kubelet|kube|k8s.io/kubernetes/cmd/kubelet|k8s.io/kubernetes"
  "kube-proxy|kube|k8s.io/kubernetes/cmd/kube-proxy|k8s.io/kubernetes"
  "coredns|coredns|.|github.com/coredns/coredns"
  "kwok|kwok|sigs.k8s.io/kwok/cmd/kwok|sigs.k8s.io/kwok"
  "helm|helm|helm.sh/helm/v3/cmd/helm|helm.sh/helm/v3"
)

STAMP_DIR="${NEREID_BIN_DIR}/.stamps"

# The scratch dir of the build in progress, removed however the script ends.
BUILD_TMP=""
trap '[[ -z "${BUILD_TMP}" ]] || rm -rf "${BUILD_TMP}"' EXIT

tool_field() { # tool_field NAME INDEX
  local entry
  for entry in "${TOOLS[@]}"; do
    IFS='|' read -r -a f <<<"${entry}"
    if [[ "${f[0]}" == "$1" ]]; then
      printf '%s\n' "${f[$2]}"
      return
    fi
  done
  nereid::fatal "unknown tool '$1' (known: $(printf '%s\n' "${TOOLS[@]}" | cut -d'|' -f1 | tr '\n' ' '))"
}

module_version() { # module_version MODDIR MODULE
  (cd "${NEREID_ROOT}/hack/tools/$1" && go list -m -f '{{.Version}}' "$2") ||
    nereid::fatal "cannot read the version of $2 from hack/tools/$1/go.mod"
}

# ldflags that give the Kubernetes binaries their real version instead of
# v0.0.0-master, which clients (kubectl's skew check, discovery) would otherwise see.
# They only affect linking, so they do not invalidate Go's compile cache.
kube_ldflags() { # kube_ldflags VERSION
  local v="$1" major minor pkg out=()
  major="${v#v}"
  major="${major%%.*}"
  minor="${v#v*.}"
  minor="${minor%%.*}"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    out+=("-X ${pkg}.gitVersion=${v}" "-X ${pkg}.gitMajor=${major}" "-X ${pkg}.gitMinor=${minor}" "-X ${pkg}.gitTreeState=clean")
  done
  printf '%s ' "${out[@]}"
}

# ldflags that give helm its release version (`helm version`) and the Kubernetes version
# of its client-go as the default of .Capabilities.KubeVersion, as Helm's own Makefile
# does; without them it says v3.22 and renders and lints for Kubernetes v1.20.
helm_ldflags() { # helm_ldflags VERSION
  local v="$1" kver major minor pkg out=()
  kver="$(module_version helm k8s.io/client-go)" # v0.MINOR.PATCH
  major=1
  minor="${kver#v0.}"
  minor="${minor%%.*}"
  out+=("-X helm.sh/helm/v3/internal/version.version=${v}")
  for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
    out+=("-X ${pkg}.k8sVersionMajor=${major}" "-X ${pkg}.k8sVersionMinor=${minor}")
  done
  printf '%s ' "${out[@]}"
}

ldflags() { # ldflags MODDIR VERSION: the -ldflags of a tool module, empty for none
  case "$1" in
    kube) kube_ldflags "$2" ;;
    helm) helm_ldflags "$2" ;;
  esac
}

recipe() { # recipe MODDIR VERSION: the build flags, part of the stamp
  local flags
  flags="$(ldflags "$1" "$2")"
  if [[ -n "${flags}" ]]; then
    printf 'go build -buildvcs=false -ldflags=%s' "${flags}"
  else
    printf 'go build -buildvcs=false'
  fi
}

stamp() { # stamp MODDIR VERSION
  local dir="${NEREID_ROOT}/hack/tools/$1"
  {
    cat "${dir}/go.mod" "${dir}/go.sum"
    find "${dir}" -maxdepth 1 -name '*.go' -print0 | sort -z | xargs -0 -r cat
    recipe "$1" "$2"
    go env GOVERSION GOOS GOARCH CGO_ENABLED
  } | sha256sum | cut -d' ' -f1
}

is_fresh() { # is_fresh NAME STAMP
  [[ -z "${NEREID_FORCE_BUILD:-}" && -x "${NEREID_BIN_DIR}/$1" && -f "${STAMP_DIR}/$1" && "$(<"${STAMP_DIR}/$1")" == "$2" ]]
}

# build_module MODDIR VERSION NAME... builds the named binaries of one tool module in a
# single `go build`, so shared packages are compiled once, then moves them into place.
build_module() {
  local moddir="$1" version="$2" name pkgs=() tmp start
  shift 2
  for name in "$@"; do
    pkgs+=("$(tool_field "${name}" 2)")
  done
  tmp="$(mktemp -d "${NEREID_BIN_DIR}/.build.XXXXXX")"
  BUILD_TMP="${tmp}"
  start=${SECONDS}
  local args=(build -buildvcs=false) flags
  flags="$(ldflags "${moddir}" "${version}")"
  if [[ -n "${flags}" ]]; then
    args+=(-ldflags "${flags}")
  fi
  if [[ "${pkgs[*]}" == "." ]]; then
    args+=(-o "${tmp}/$1" .)
  else
    args+=(-o "${tmp}/" "${pkgs[@]}")
  fi
  # No -trimpath: the flag changes every package's compile action ID, so with it Go's
  # build cache, warmed by an earlier plain `go build` of the same modules, misses and
  # Kubernetes recompiles from scratch (minutes on 2 cores). The module graph is read as
  # committed (-mod=readonly, Go's default): a go.sum that does not match fails loudly
  # instead of being rewritten.
  if ! (cd "${NEREID_ROOT}/hack/tools/${moddir}" && go "${args[@]}"); then
    nereid::fatal "building $* from hack/tools/${moddir} failed (Go's output is above). The first build downloads modules through the Go module proxy (GOPROXY=$(go env GOPROXY)); check that it is reachable."
  fi
  for name in "$@"; do
    mv -f "${tmp}/${name}" "${NEREID_BIN_DIR}/${name}"
    stamp "${moddir}" "${version}" >"${STAMP_DIR}/${name}"
  done
  rm -rf "${tmp}"
  BUILD_TMP=""
  nereid::log "built $* in $((SECONDS - start))s"
}

main() {
  local wanted=("$@") name moddir version s
  if ((${#wanted[@]} == 0)); then
    mapfile -t wanted < <(printf '%s\n' "${TOOLS[@]}" | cut -d'|' -f1)
  fi
  mkdir -p "${NEREID_BIN_DIR}" "${STAMP_DIR}"

  # Group what needs building by tool module, keeping the table's order.
  local -A todo=() versions=()
  local order=()
  for name in "${wanted[@]}"; do
    moddir="$(tool_field "${name}" 1)"
    if [[ -z "${versions[${moddir}]:-}" ]]; then
      versions[${moddir}]="$(module_version "${moddir}" "$(tool_field "${name}" 3)")"
    fi
    version="${versions[${moddir}]}"
    s="$(stamp "${moddir}" "${version}")"
    if is_fresh "${name}" "${s}"; then
      continue
    fi
    if [[ -z "${todo[${moddir}]:-}" ]]; then
      order+=("${moddir}")
    fi
    todo[${moddir}]+="${name} "
  done

  if ((${#order[@]} == 0)); then
    nereid::log "tools up to date in ${NEREID_BIN_DIR}"
    return
  fi
  for moddir in "${order[@]}"; do
    # shellcheck disable=SC2206 # the names are single words
    local names=(${todo[${moddir}]})
    nereid::log "building ${names[*]} ${versions[${moddir}]} into ${NEREID_BIN_DIR} (the first time takes several minutes; later builds reuse Go's build cache)…"
    build_module "${moddir}" "${versions[${moddir}]}" "${names[@]}"
  done
}

main "$@"
