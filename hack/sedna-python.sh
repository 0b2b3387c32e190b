#!/usr/bin/env bash
# Installs Debian's Python packages that Sedna's worker library imports, which
# the integration tests that run Sedna's own workers need (test/sednalib):
# numpy, requests, tenacity, websockets, fastapi, multipart, uvicorn, colorlog,
# joblib, pandas, yaml, six, watchdog and sqlalchemy (multipart and sqlalchemy
# for Sedna's knowledge base server) for /usr/bin/python3. Does nothing when they
# are there; without root or apt-get it says that those tests will skip.
set -euo pipefail

readonly PACKAGES=(python3-numpy python3-requests python3-tenacity python3-websockets python3-fastapi python3-multipart
  python3-uvicorn python3-colorlog python3-joblib python3-pandas python3-yaml python3-six python3-watchdog python3-sqlalchemy)

if /usr/bin/python3 -c 'import numpy, requests, tenacity, websockets, fastapi, multipart, uvicorn, colorlog, joblib, pandas, yaml, six, watchdog, sqlalchemy' 2>/dev/null; then
  exit 0
fi
if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
  echo "Sedna's worker library cannot run here (not root, or no apt-get): the tests of Sedna's own workers will skip" >&2
  exit 0
fi
echo "installing Debian's Python packages for Sedna's worker library: ${PACKAGES[*]}" >&2
apt-get update -qq && apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >/dev/null ||
  echo "installing them failed: the tests of Sedna's own workers will skip" >&2
