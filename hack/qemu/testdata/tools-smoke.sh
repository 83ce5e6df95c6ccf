#!/usr/bin/env bash
# Runs inside the qemu guest (hack/qemu): the tools tabby-node drives work there, with the kernel
# loading nf_tables, xt_* matches and ip_set types on demand through /sbin/modprobe.
set -euo pipefail
ns=tools-smoke
ip netns add "$ns"
in_ns() { ip netns exec "$ns" "$@"; }
in_ns iptables -N TABBY-SMOKE
in_ns iptables -A TABBY-SMOKE -m comment --comment tabby -m conntrack --ctstate ESTABLISHED -j ACCEPT
in_ns iptables -t nat -A POSTROUTING -s 10.244.0.0/16 ! -d 10.244.0.0/16 -j MASQUERADE
in_ns ipset create tabby-smoke hash:net
in_ns ipset add tabby-smoke 10.244.1.0/26
in_ns iptables -A TABBY-SMOKE -m set --match-set tabby-smoke src -j DROP
saved=$(in_ns iptables-save)
for rule in '-A TABBY-SMOKE -m comment --comment tabby -m conntrack --ctstate ESTABLISHED -j ACCEPT' \
	'-A TABBY-SMOKE -m set --match-set tabby-smoke src -j DROP' \
	'-A POSTROUTING -s 10.244.0.0/16 ! -d 10.244.0.0/16 -j MASQUERADE'; do
	grep -qxF -- "$rule" <<<"$saved" || { echo "missing rule: $rule"; echo "$saved"; exit 1; }
done
in_ns iptables-legacy -A FORWARD -m mark --mark 0x1 -j ACCEPT
in_ns iptables-legacy-save | grep -q -- '--mark 0x1'
in_ns conntrack -L >/dev/null 2>&1
/bin/sh -c 'echo sh works'
echo "PASS: iptables (nft, legacy), ipset and conntrack work in the guest"
