#!/usr/bin/env bash
# Boots Debian's kernel under qemu and runs SCRIPT with bash in the guest; SHAREDIR (optional) is
# mounted at /mnt and is the script's working directory (static binaries in SHAREDIR/bin are on
# PATH). The guest console streams to stdout; the exit status is the script's (125: the guest
# failed). Prepares the kernel on first use (hack/qemu/prepare.sh).
#   hack/qemu/run.sh [-timeout 5m] [-m 1024] [-env K=V]... SCRIPT [SHAREDIR]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=${TABBY_CACHE:-$HOME/.cache/tabby}/qemu/qemu-run
# Built outside the tree; `go build` is a no-op-fast cache hit when nothing changed.
(cd "$here" && go build -o "$bin" ./cmd/qemu-run)
exec "$bin" "$@"
