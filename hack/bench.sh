#!/usr/bin/env bash
# make bench: each component's benchmark prints tabby's figures side by side with its named
# reference, measured in the same run (ratios hold on a noisy machine, absolute times do not).
# make bench-scale (bench.sh --scale) runs the cluster-scale simulations instead: minutes each.
set -uo pipefail
cd "$(dirname "$0")/.."
scale_benches=" scale rrscale "
want_scale=false
if [[ "${1:-}" == "--scale" ]]; then
  want_scale=true
  shift
fi
status=0
for b in hack/bench/*/; do
  name=$(basename "$b")
  [[ "$name" == benchutil ]] && continue
  is_scale=false
  [[ "$scale_benches" == *" $name "* ]] && is_scale=true
  [[ "$is_scale" == "$want_scale" ]] || continue
  echo "=== bench: $name ==="
  if ! go run "./$b" "$@"; then
    echo "bench $name FAILED" >&2
    status=1
  fi
  echo
done
exit $status
