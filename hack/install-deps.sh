#!/usr/bin/env bash
# Installs the Debian packages tabby's tests use, once: iptables/ipset (felix's NAT), bird2 and
# frr (real routers as ToR peers), qemu + busybox + cpio + kmod (a real kernel with ipip), tcpdump,
# ping, conntrack, traceroute; runc for containerd (which hack/controlplane/build.sh builds:
# Debian's containerd 1.6 is too old for kubelet 1.36); curl, OpenBSD's nc and dig, which the
# cluster's agnhost image takes from the host (hack/cluster/images); prometheus (promtool and a
# real server scraping the lab, for the chart's dashboard and alert rules); chromium (headless, for
# the web view's browser tests). Needs root (CI is root). Does nothing when everything is present.
set -euo pipefail
need=()
have() { command -v "$1" >/dev/null 2>&1; }
have iptables || need+=(iptables)
have ipset || need+=(ipset)
have bird || need+=(bird2)
[ -x /usr/lib/frr/bgpd ] || need+=(frr)
have qemu-system-x86_64 || need+=(qemu-system-x86)
[ -x /bin/busybox ] || need+=(busybox-static)
have cpio || need+=(cpio)
have depmod || need+=(kmod)
have tcpdump || need+=(tcpdump)
have ping || need+=(iputils-ping)
have conntrack || need+=(conntrack)
have traceroute || need+=(traceroute)
have ip || need+=(iproute2)
have curl || need+=(curl)
[ -x /bin/nc.openbsd ] || need+=(netcat-openbsd)
have dig || need+=(bind9-dnsutils)
have runc || need+=(runc)
have promtool || need+=(prometheus)
have chromium || need+=(chromium)
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" != 0 ]; then
  echo "install-deps: need root to install: ${need[*]}" >&2
  exit 1
fi
echo "install-deps: installing ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
# The packaged daemons must not run on the host: tests start their own, in namespaces.
for svc in bird frr prometheus; do
  systemctl disable --now "$svc" >/dev/null 2>&1 || service "$svc" stop >/dev/null 2>&1 || true
done
