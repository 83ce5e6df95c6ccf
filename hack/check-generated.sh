#!/usr/bin/env bash
# Fails when generated files (deepcopy, CRDs, the chart's crds/, the web view's built page) are
# stale: regenerates and compares with what is checked in.
set -euo pipefail
cd "$(dirname "$0")/.."
make -s generate >/dev/null
if ! git diff --quiet -- apis charts/tabby/crds || [ -n "$(git status --porcelain -- apis charts/tabby/crds)" ]; then
  echo "generated files are stale: run 'make generate' and commit the result" >&2
  git status --porcelain -- apis charts/tabby/crds >&2
  git --no-pager diff --stat -- apis charts/tabby/crds >&2
  exit 1
fi
# The web view's page: `make ui` from package-lock.json reproduces ui/web/dist byte for byte.
make -s ui >/dev/null
if ! git diff --quiet -- ui/web/dist || [ -n "$(git status --porcelain -- ui/web/dist)" ]; then
  echo "the web view's built page is stale: run 'make ui' and commit ui/web/dist" >&2
  git status --porcelain -- ui/web/dist >&2
  exit 1
fi
