#!/usr/bin/env bash
# containerd-check.sh DIR ARCHIVES TABBY_TAG: imports pause.tar, tabby.tar and agnhost.tar of
# ARCHIVES into a containerd of its own (state in DIR, containerd, ctr, the runc shim and runc
# on PATH) and runs a container of each, host network only, nothing sent.
#
# Run it in a mount namespace of its own (unshare --mount --propagation private): a tmpfs over
# /run takes the paths containerd's shim and ctr hard-code (/run/containerd/s, /run/containerd/runc,
# /run/containerd/fifo), so nothing reaches the host's /run, and every mount goes with the
# namespace.
set -uo pipefail
d=$1 archives=$2 tabbytag=$3
mount -t tmpfs tmpfs /run
mkdir -p "$d/root" "$d/state" "$d/opt"
# No CRI (no kubelet here) and no NRI; nothing of the host's /etc/containerd.
cat >"$d/config.toml" <<CFG
version = 4
root = '$d/root'
state = '$d/state'
imports = []
disabled_plugins = ['io.containerd.grpc.v1.cri', 'io.containerd.cri.v1.runtime', 'io.containerd.cri.v1.images', 'io.containerd.podsandbox.controller.v1.podsandbox', 'io.containerd.nri.v1.nri']
[plugins]
  [plugins.'io.containerd.internal.v1.opt']
    path = '$d/opt'
  [plugins.'io.containerd.server.v1.grpc']
    address = '$d/c.sock'
  [plugins.'io.containerd.server.v1.ttrpc']
    address = '$d/c.sock.ttrpc'
CFG
containerd --config "$d/config.toml" >"$d/containerd.log" 2>&1 &
cpid=$!
for _ in $(seq 100); do [ -S "$d/c.sock" ] && break; sleep 0.1; done
C="ctr --address $d/c.sock -n k8s.io"
cg=/tabby-image-check-$$
fail=0
check() {
  local what=$1 out
  shift
  if out=$("$@" 2>&1); then
    echo "ok: $what: $(echo "$out" | grep -v DEPRECATION | head -1)"
  else
    echo "FAIL: $what: $*"
    echo "$out" | grep -v DEPRECATION | tail -20 | sed 's/^/    /'
    fail=1
  fi
}
expect() { # expect WHAT WANT COMMAND...: COMMAND succeeds and prints WANT
  local what=$1 want=$2 out
  shift 2
  if out=$("$@" 2>&1) && grep -q -- "$want" <<<"$out"; then
    echo "ok: $what"
  else
    echo "FAIL: $what: want $want from $*"
    echo "$out" | grep -v DEPRECATION | tail -20 | sed 's/^/    /'
    fail=1
  fi
}
PAUSE=registry.k8s.io/pause:3.10.2
TABBY=ghcr.io/tabbynet/tabby:$tabbytag
AGNHOST=registry.k8s.io/e2e-test-images/agnhost:2.63.0

for a in pause tabby agnhost; do
  check "import $a" $C images import "$archives/$a.tar"
done
for ref in $PAUSE $TABBY $AGNHOST; do
  expect "named $ref" "^$ref " $C images ls
done
before=$($C images ls 2>/dev/null | sort)
for a in pause tabby agnhost; do $C images import "$archives/$a.tar" >/dev/null 2>&1; done
after=$($C images ls 2>/dev/null | sort)
[ "$before" = "$after" ] && echo "ok: a re-import changes nothing" || { echo "FAIL: a re-import changed the images"; fail=1; }

# A detached task that must stop, exit 0, on SIGTERM.
stops() {
  local what=$1 image=$2 st=""
  $C run -d --net-host --cgroup "$cg/$what" "$image" "$what" >/dev/null 2>&1
  sleep 0.5
  expect "$what runs" RUNNING $C task ls
  $C task kill --signal SIGTERM "$what" >/dev/null 2>&1
  for _ in $(seq 50); do
    st=$($C task ls 2>/dev/null | awk -v id="$what" '$1==id {print $3}')
    [ "$st" = STOPPED ] && break
    sleep 0.1
  done
  [ "$st" = STOPPED ] && echo "ok: $what stops on SIGTERM" || { echo "FAIL: $what did not stop on SIGTERM ($st)"; fail=1; }
  $C task delete "$what" >/dev/null 2>&1
  $C container delete "$what" >/dev/null 2>&1
}
stops pause $PAUSE
stops agnhost-pause $AGNHOST # the image's default command: /agnhost pause

n=0
run() { # run WANT IMAGE COMMAND...
  local want=$1 image=$2
  shift 2
  n=$((n + 1))
  expect "$* ~ $want" "$want" $C run --rm --net-host --cgroup "$cg/r$n" "$image" "r$n" "$@"
}
run "tabby-node version" $TABBY /usr/local/bin/tabby-node --version
run "tabbyctl" $TABBY /usr/local/bin/tabbyctl --help
for c in iptables iptables-nft ip6tables-nft iptables-nft-save ip6tables-nft-save; do
  run "nf_tables" $TABBY $c --version
done
for c in iptables-legacy ip6tables-legacy iptables-legacy-save ip6tables-legacy-save; do
  run "legacy" $TABBY $c --version
done
for c in iptables-nft-restore iptables-legacy-restore ip6tables-nft-restore ip6tables-legacy-restore; do
  run "Usage" $TABBY $c --help
done
# ipset --version asks the kernel for its protocol: CAP_NET_ADMIN, as the DaemonSet's
# privileged container has. Nothing is changed.
n=$((n + 1))
expect "ipset --version" "protocol version" $C run --rm --privileged --net-host --cgroup "$cg/r$n" $TABBY "r$n" ipset --version
run "Usage" $AGNHOST /agnhost --help
run "sh=dash" $AGNHOST /bin/sh -c 'echo sh=$(readlink /usr/bin/sh)'
run "OpenBSD netcat" $AGNHOST /bin/sh -c 'nc -h 2>&1'
run "curl " $AGNHOST /bin/sh -c 'curl --version'
run "DiG" $AGNHOST /bin/sh -c 'dig -v 2>&1'
run "1 2 3" $AGNHOST /bin/sh -c 'seq 1 3 | tr "\n" " "'
expect "no task left" "^TASK" $C task ls
[ "$($C containers ls -q 2>/dev/null)" = "" ] && echo "ok: no container left" || { echo "FAIL: containers left"; fail=1; }

kill $cpid
wait $cpid 2>/dev/null
# A shim that outlived its task, found by this containerd's unique socket path.
for p in $(pgrep -f "containerd-shim-runc-v2 .*-address $d/c.sock"); do kill "$p"; done
for ctl in /sys/fs/cgroup/*/; do
  [ -d "$ctl${cg#/}" ] && find "$ctl${cg#/}" -depth -type d -exec rmdir {} \;
done
grep -q " $d/" /proc/self/mountinfo && { echo "FAIL: mounts left under $d"; fail=1; }
[ $fail = 0 ] || tail -20 "$d/containerd.log" | sed 's/^/    containerd: /'
exit $fail
