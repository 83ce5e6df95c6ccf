#!/usr/bin/env bash
# Builds pinned kube-apiserver and etcd from the Go module proxy and caches them outside the
# tracked tree (default ~/.cache/tabby/bin). A second run with the binaries present costs nothing.
#
# kubernetes cannot be `go install`ed directly: its go.mod replaces every k8s.io/* staging module
# with ./staging/..., which a module consumer cannot see. A wrapper module requires
# k8s.io/kubernetes and replaces each of those staging modules with its published release.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.36.3}
STAGING_VERSION=${STAGING_VERSION:-v0.36.3}
ETCD_VERSION=${ETCD_VERSION:-v3.6.6}
CACHE=${TABBY_CACHE:-$HOME/.cache/tabby}
BIN="$CACHE/bin"
mkdir -p "$BIN"

log() { printf '[controlplane] %s\n' "$*" >&2; }

# wrapper_module DIR writes a module in DIR that requires k8s.io/kubernetes and replaces every
# `k8s.io/X => ./staging/...` of kubernetes' go.mod with `k8s.io/X => k8s.io/X STAGING`.
wrapper_module() {
  local dir=$1 gomod
  gomod=$(cd "$dir" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  {
    echo "module tabby.local/k8sbuild"
    echo "go 1.25"
    echo "require k8s.io/kubernetes $K8S_VERSION"
    grep -E '^\s*k8s\.io/[^ ]+ => \./staging/' "$gomod" | awk -v v="$STAGING_VERSION" '{print "replace " $1 " => " $1 " " v}'
  } > "$dir/go.mod"
  printf 'package main\nimport (\n_ "k8s.io/kubernetes/cmd/kube-apiserver/app"\n_ "k8s.io/kubectl/pkg/cmd"\n)\nfunc main() {}\n' > "$dir/tools.go"
  (cd "$dir" && go mod tidy >/dev/null 2>&1 || true)
}

# build_k8s NAME: kube-apiserver (about 6 minutes on 2 cores, once) or kubectl (about 2 more).
build_k8s() {
  local name=$1 out="$BIN/$1-$K8S_VERSION"
  if [ -x "$out" ]; then log "$name $K8S_VERSION cached at $out"; return; fi
  local work; work=$(mktemp -d)
  trap 'rm -rf "$work"' RETURN
  local est="about 10 minutes on 2 cores"
  [ "$name" = kubectl ] && est="about 2 minutes"
  log "building $name $K8S_VERSION from the Go module proxy ($est, once; cached in $BIN)"
  wrapper_module "$work"
  (cd "$work" && CGO_ENABLED=0 go build -trimpath -ldflags=-s -o "$out.tmp" "k8s.io/kubernetes/cmd/$name")
  mv "$out.tmp" "$out"
  log "$name ready: $out"
}

build_etcd() {
  local out="$BIN/etcd-$ETCD_VERSION"
  if [ -x "$out" ]; then log "etcd $ETCD_VERSION cached at $out"; return; fi
  local work; work=$(mktemp -d)
  trap 'rm -rf "$work"' RETURN
  log "building etcd $ETCD_VERSION (about 30 seconds, once)"
  printf 'module tabby.local/etcdbuild\ngo 1.25\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" > "$work/go.mod"
  echo 'package main; import _ "go.etcd.io/etcd/server/v3/etcdmain"; func main() {}' > "$work/tools.go"
  (cd "$work" && go mod tidy >/dev/null 2>&1 || true)
  (cd "$work" && CGO_ENABLED=0 go build -trimpath -ldflags=-s -o "$out.tmp" go.etcd.io/etcd/server/v3)
  mv "$out.tmp" "$out"
  log "etcd ready: $out"
}

build_etcd
build_k8s kube-apiserver
build_k8s kubectl
ln -sf "kube-apiserver-$K8S_VERSION" "$BIN/kube-apiserver"
ln -sf "kubectl-$K8S_VERSION" "$BIN/kubectl"
ln -sf "etcd-$ETCD_VERSION" "$BIN/etcd"
echo "$BIN"
