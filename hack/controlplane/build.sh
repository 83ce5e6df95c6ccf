#!/usr/bin/env bash
# Builds pinned Kubernetes components, etcd and containerd from the Go module proxy and caches
# them outside the tracked tree (default ~/.cache/tabby/bin) as NAME-VERSION plus a NAME symlink.
# A second run with the binaries present costs nothing.
#
# Usage: build.sh [SET...]   (no SET: controlplane)
#   controlplane  etcd, kube-apiserver, kubectl
#   node          kubelet, kube-proxy, kube-scheduler, kube-controller-manager, and agnhost (the
#                 upstream test image's binary, which the cluster's own tests run too)
#   containerd    containerd, containerd-shim-runc-v2, ctr (runc comes from hack/install-deps.sh)
#   e2e           e2e.test (upstream's e2e suite, runs standalone: no ginkgo CLI)
#   dns           coredns (the cluster's DNS server, kubeadm's add-on)
#
# kubernetes cannot be `go install`ed directly: its go.mod replaces every k8s.io/* staging module
# with ./staging/..., which a module consumer cannot see. A wrapper module requires
# k8s.io/kubernetes and replaces each of those staging modules with its published release.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.36.3}
STAGING_VERSION=${STAGING_VERSION:-v0.36.3}
ETCD_VERSION=${ETCD_VERSION:-v3.6.6}
CONTAINERD_VERSION=${CONTAINERD_VERSION:-v2.4.2}
# kubeadm's CoreDNS of K8S_VERSION (cmd/kubeadm/app/constants: CoreDNSVersion).
COREDNS_VERSION=${COREDNS_VERSION:-v1.14.2}
CACHE=${TABBY_CACHE:-$HOME/.cache/tabby}
BIN="$CACHE/bin"
mkdir -p "$BIN"

log() { printf '[controlplane] %s\n' "$*" >&2; }

# link NAME VERSION: the plain name is what callers look up; containerd in particular finds its
# shim on $PATH by exactly the name containerd-shim-runc-v2.
link() { ln -sfn "$1-$2" "$BIN/$1"; }

# wrapper_module DIR PKG... writes a module in DIR that requires k8s.io/kubernetes and replaces
# every `k8s.io/X => ./staging/...` of kubernetes' go.mod with `k8s.io/X => k8s.io/X STAGING`.
# Each PKG is declared a tool so that `go mod tidy` records everything it imports; unlike a
# blank import in a tools.go, that also works for main packages (agnhost) and takes in the test
# imports of a test package (e2e).
wrapper_module() {
  local dir=$1 gomod pkg
  shift
  gomod=$(cd "$dir" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  {
    echo "module tabby.local/k8sbuild"
    echo "go 1.25"
    echo "require k8s.io/kubernetes $K8S_VERSION"
    grep -E '^\s*k8s\.io/[^ ]+ => \./staging/' "$gomod" | awk -v v="$STAGING_VERSION" '{print "replace " $1 " => " $1 " " v}'
    for pkg in "$@"; do echo "tool $pkg"; done
  } > "$dir/go.mod"
  (cd "$dir" && go mod tidy >/dev/null 2>&1) || true
}

# What upstream's release build stamps (hack/lib/version.sh), minus the commit, which the module
# proxy does not tell. Unstamped, every component says v0.0.0-master, to `--version`, in /version
# and in the version a kubelet reports for its node.
k8s_ldflags() {
  local v=${K8S_VERSION#v} flags=-s p
  for p in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    flags+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=${v%%.*} -X $p.gitMinor=$(cut -d. -f2 <<<"$v") -X $p.gitTreeState=clean"
  done
  echo "$flags"
}

# build_k8s NAME PKG ESTIMATE: a main package of k8s.io/kubernetes; the estimates are for 2 cores
# with the Go build cache warm from kube-apiserver, which shares most of the tree.
build_k8s() {
  local name=$1 pkg=$2 est=$3 out="$BIN/$1-$K8S_VERSION"
  if [ -x "$out" ]; then log "$name $K8S_VERSION cached at $out"; link "$name" "$K8S_VERSION"; return; fi
  local work; work=$(mktemp -d)
  trap 'rm -rf "$work"' RETURN
  log "building $name $K8S_VERSION from the Go module proxy ($est, once; cached in $BIN)"
  wrapper_module "$work" "$pkg"
  (cd "$work" && CGO_ENABLED=0 go build -trimpath -ldflags="$(k8s_ldflags)" -o "$out.tmp" "$pkg")
  mv "$out.tmp" "$out"
  link "$name" "$K8S_VERSION"
  log "$name ready: $out"
}

# The e2e suite is a test binary; its ginkgo specs and manifests are compiled in, so e2e.test
# runs standalone (--ginkgo.focus, --ginkgo.dry-run) without the ginkgo CLI.
build_e2e_test() {
  local out="$BIN/e2e.test-$K8S_VERSION"
  if [ -x "$out" ]; then log "e2e.test $K8S_VERSION cached at $out"; link e2e.test "$K8S_VERSION"; return; fi
  local work; work=$(mktemp -d)
  trap 'rm -rf "$work"' RETURN
  log "building e2e.test $K8S_VERSION from the Go module proxy (about 5 minutes on 2 cores, once; cached in $BIN)"
  wrapper_module "$work" k8s.io/kubernetes/test/e2e
  (cd "$work" && CGO_ENABLED=0 go test -c -trimpath -ldflags="$(k8s_ldflags)" -o "$out.tmp" k8s.io/kubernetes/test/e2e)
  mv "$out.tmp" "$out"
  link e2e.test "$K8S_VERSION"
  log "e2e.test ready: $out"
}

build_etcd() {
  local out="$BIN/etcd-$ETCD_VERSION"
  if [ -x "$out" ]; then log "etcd $ETCD_VERSION cached at $out"; link etcd "$ETCD_VERSION"; return; fi
  local work; work=$(mktemp -d)
  trap 'rm -rf "$work"' RETURN
  log "building etcd $ETCD_VERSION (about 30 seconds, once)"
  printf 'module tabby.local/etcdbuild\ngo 1.25\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" > "$work/go.mod"
  echo 'package main; import _ "go.etcd.io/etcd/server/v3/etcdmain"; func main() {}' > "$work/tools.go"
  (cd "$work" && go mod tidy >/dev/null 2>&1) || true
  (cd "$work" && CGO_ENABLED=0 go build -trimpath -ldflags=-s -o "$out.tmp" go.etcd.io/etcd/server/v3)
  mv "$out.tmp" "$out"
  link etcd "$ETCD_VERSION"
  log "etcd ready: $out"
}

# build_containerd NAME ESTIMATE: a command of containerd 2.x. Static, without cgo: the only
# cgo plugin is the btrfs snapshotter; devmapper and zfs are left out too (overlayfs is what a
# node uses). The CRI plugin is built in. The shim serves ttrpc only (no_grpc), as upstream's.
build_containerd() {
  local name=$1 est=$2 out="$BIN/$1-$CONTAINERD_VERSION"
  local pkg="github.com/containerd/containerd/v2/cmd/$name" tags=no_btrfs,no_devmapper,no_zfs,urfave_cli_no_docs
  if [ -x "$out" ]; then log "$name $CONTAINERD_VERSION cached at $out"; link "$name" "$CONTAINERD_VERSION"; return; fi
  local work; work=$(mktemp -d)
  trap 'rm -rf "$work"' RETURN
  log "building $name $CONTAINERD_VERSION from the Go module proxy ($est, once; cached in $BIN)"
  [ "$name" = containerd-shim-runc-v2 ] && tags+=,no_grpc
  printf 'module tabby.local/containerdbuild\ngo 1.25\nrequire github.com/containerd/containerd/v2 %s\ntool %s\n' "$CONTAINERD_VERSION" "$pkg" > "$work/go.mod"
  (cd "$work" && go mod tidy >/dev/null 2>&1) || true
  (cd "$work" && CGO_ENABLED=0 go build -trimpath -tags "$tags" \
    -ldflags="-s -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION" -o "$out.tmp" "$pkg")
  mv "$out.tmp" "$out"
  link "$name" "$CONTAINERD_VERSION"
  log "$name ready: $out"
}

# build_coredns: CoreDNS with its release's plugin set (the generated plugin list is part of the
# module) and the build tag of upstream's Makefile, which leaves gRPC's request tracing out.
build_coredns() {
  local out="$BIN/coredns-$COREDNS_VERSION" pkg=github.com/coredns/coredns
  if [ -x "$out" ]; then log "coredns $COREDNS_VERSION cached at $out"; link coredns "$COREDNS_VERSION"; return; fi
  local work; work=$(mktemp -d)
  trap 'rm -rf "$work"' RETURN
  log "building coredns $COREDNS_VERSION from the Go module proxy (about 3 minutes on 2 cores, once; cached in $BIN)"
  printf 'module tabby.local/corednsbuild\ngo 1.25\nrequire %s %s\ntool %s\n' "$pkg" "$COREDNS_VERSION" "$pkg" > "$work/go.mod"
  (cd "$work" && go mod tidy >/dev/null 2>&1) || true
  (cd "$work" && CGO_ENABLED=0 go build -trimpath -tags grpcnotrace -ldflags=-s -o "$out.tmp" "$pkg")
  mv "$out.tmp" "$out"
  link coredns "$COREDNS_VERSION"
  log "coredns ready: $out"
}

[ $# -gt 0 ] || set -- controlplane
for set in "$@"; do
  case $set in
    controlplane)
      build_etcd
      build_k8s kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "about 10 minutes on 2 cores"
      build_k8s kubectl k8s.io/kubernetes/cmd/kubectl "about 2 minutes"
      ;;
    node)
      build_k8s kubelet k8s.io/kubernetes/cmd/kubelet "about 2 minutes"
      build_k8s kube-proxy k8s.io/kubernetes/cmd/kube-proxy "about 20 seconds"
      build_k8s kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler "about 10 seconds"
      build_k8s kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "about a minute"
      build_k8s agnhost k8s.io/kubernetes/test/images/agnhost "about 15 seconds"
      ;;
    containerd)
      build_containerd containerd "about 90 seconds on 2 cores"
      build_containerd containerd-shim-runc-v2 "seconds"
      build_containerd ctr "seconds"
      ;;
    e2e)
      build_e2e_test
      ;;
    dns)
      build_coredns
      ;;
    *) log "unknown build set: $set (controlplane, node, containerd, e2e, dns)"; exit 2 ;;
  esac
done
echo "$BIN"
