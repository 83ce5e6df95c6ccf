#!/usr/bin/env bash
# Fails when generated files (deepcopy, CRDs, the chart's crds/) are stale: regenerates and
# compares with what is checked in.
set -euo pipefail
cd "$(dirname "$0")/.."
make -s generate >/dev/null
if ! git diff --quiet -- apis charts/tabby/crds || [ -n "$(git status --porcelain -- apis charts/tabby/crds)" ]; then
  echo "generated files are stale: run 'make generate' and commit the result" >&2
  git status --porcelain -- apis charts/tabby/crds >&2
  git --no-pager diff --stat -- apis charts/tabby/crds >&2
  exit 1
fi
