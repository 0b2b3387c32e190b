#!/usr/bin/env bash
# Regenerates everything generated from the API types, one generator per artifact:
#   deepcopy                              k8s.io/code-generator (kube_codegen.sh gen_helpers)
#   clientset, listers, informers,
#   apply configurations                  k8s.io/code-generator (kube_codegen.sh gen_client)
#   CRD YAML in build/charts/nereid/crds/ controller-gen (sigs.k8s.io/controller-tools),
#     its descriptions trimmed (hack/crddesc), the DIJob CRD's conversion
#     webhook stanza added (hack/crdconversion), its v1alpha1 worker
#     templates' field names written (hack/crdv1templates),
#     copied to build/crds/ for `kubectl apply -f build/crds/`
#   build/deploy/nereid.yaml              helm template of the chart (hack/update-manifests.sh)
# The generator versions are pinned in hack/tools/codegen/go.mod; their binaries are
# cached under ${NEREID_CACHE_DIR:-.cache}/bin/codegen.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
CACHE_DIR="${NEREID_CACHE_DIR:-${ROOT}/.cache}"
MODULE="github.com/nereid-ml/nereid"
BOILERPLATE="${ROOT}/hack/boilerplate.go.txt"

export GOBIN="${CACHE_DIR}/bin/codegen"
mkdir -p "${GOBIN}"
export PATH="${GOBIN}:${PATH}"

# kube_codegen.sh greps the output folders before it writes them.
mkdir -p pkg/client/{applyconfiguration,clientset,listers,informers}
# `go list -m -f {{.Dir}}` prints nothing for a module that is not in the module cache
# yet (a new machine), so download it first; then kube_codegen.sh has its scripts.
CODEGEN_PKG="$(cd hack/tools/codegen && go mod download k8s.io/code-generator && go list -m -f '{{.Dir}}' k8s.io/code-generator)"
if [[ -z "${CODEGEN_PKG}" || ! -f "${CODEGEN_PKG}/kube_codegen.sh" ]]; then
  echo "k8s.io/code-generator is not in the Go module cache after 'go mod download' (GOPROXY=$(go env GOPROXY)); cannot generate" >&2
  exit 1
fi
# shellcheck source=/dev/null
source "${CODEGEN_PKG}/kube_codegen.sh"

kube::codegen::gen_helpers \
  --boilerplate "${BOILERPLATE}" \
  "${ROOT}/pkg/apis"

kube::codegen::gen_client \
  --with-watch \
  --with-applyconfig \
  --output-dir "${ROOT}/pkg/client" \
  --output-pkg "${MODULE}/pkg/client" \
  --boilerplate "${BOILERPLATE}" \
  "${ROOT}/pkg/apis"

(cd hack/tools/codegen && go build -o "${GOBIN}/controller-gen" sigs.k8s.io/controller-tools/cmd/controller-gen)
# allowDangerousTypes: Sedna's trainProb and threshold are floats that users write
# as 0.8. generateEmbeddedObjectMeta: without it the labels and annotations of
# worker templates are pruned. Every description is generated, then crddesc keeps
# only those of Nereid's own fields (kubectl explain): CRDs that embed pod
# templates with their descriptions exceed the 256 KiB annotation of client-side
# apply (see docs/development.md, "Regenerating code").
CHART_CRDS="build/charts/nereid/crds"
rm -rf "${ROOT:?}/${CHART_CRDS}" "${ROOT}/build/crds"
controller-gen \
  crd:allowDangerousTypes=true,generateEmbeddedObjectMeta=true \
  paths="./pkg/apis/..." \
  output:crd:artifacts:config="${CHART_CRDS}"
go run ./hack/crddesc "${ROOT}/${CHART_CRDS}"
# controller-gen writes no conversion stanza; the DIJob CRD serves two
# versions through the GlobalManager's conversion webhook.
go run ./hack/crdconversion "${ROOT}/${CHART_CRDS}"
# controller-gen writes v1alpha1's collector and learner templates schemaless;
# their field names are checked all the same.
go run ./hack/crdv1templates "${ROOT}/${CHART_CRDS}"
# The chart installs the CRDs from its crds/; users who apply them by hand find
# the same files where they always were.
mkdir -p "${ROOT}/build/crds"
cp "${ROOT}/${CHART_CRDS}"/*.yaml "${ROOT}/build/crds/"

bash "${ROOT}/hack/update-manifests.sh"
