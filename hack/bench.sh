#!/usr/bin/env bash
# make bench: each component's benchmark prints tabby's figures side by side with its named
# reference, measured in the same run (ratios hold on a noisy machine, absolute times do not).
# The benchmarks are packages of the lab's Go module (hack/go.mod): they run from there.
set -uo pipefail
cd "$(dirname "$0")"
status=0
for b in bench/*/; do
  name=$(basename "$b")
  # Libraries (benchutil) and the scale benchmarks `make bench-scale` runs.
  grep -qx 'package main' "$b"*.go || continue
  case " ${SKIP_BENCHES:-} " in *" $name "*) continue ;; esac
  echo "=== bench: $name ==="
  if ! go run "./$b" "$@"; then
    echo "bench $name FAILED" >&2
    status=1
  fi
  echo
done
exit $status
