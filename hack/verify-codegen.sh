#!/usr/bin/env bash
# Fails when the generated code, CRDs or plain manifests are not what `make generate`
# produces from the current API types and chart: it regenerates into a copy of the tree
# and diffs.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export NEREID_CACHE_DIR="${NEREID_CACHE_DIR:-${ROOT}/.cache}"
TMP="$(mktemp -d)"
trap 'rm -rf "${TMP}"' EXIT

tar -C "${ROOT}" --exclude=./.git --exclude=./.cache --exclude=./_output -cf - . | tar -C "${TMP}" -xf -
bash "${TMP}/hack/update-codegen.sh" >"${TMP}.log" 2>&1 || { cat "${TMP}.log"; exit 1; }
rm -f "${TMP}.log"

status=0
for dir in pkg/apis pkg/client build/charts/nereid/crds build/crds build/deploy; do
  if ! diff -ruN "${ROOT}/${dir}" "${TMP}/${dir}" >"${TMP}/diff.txt"; then
    echo "generated files under ${dir} are out of date; run 'make generate'. Differences:" >&2
    head -n 40 "${TMP}/diff.txt" >&2
    status=1
  fi
done
[[ ${status} -eq 0 ]] && echo "generated code, CRDs and manifests are up to date"
exit "${status}"
