#!/usr/bin/env bash
# Runs inside the qemu guest (hack/qemu): proves a real IPIP path like tabby's cross-subnet mode.
#
#   pod-a (10.244.1.5)                                                pod-b (10.244.2.5)
#        | veth                                                            | veth
#   node-a  198.51.100.10/24 --- router (no pod routes) --- 203.0.113.10/24  node-b
#   tunl0 10.244.1.0/32                                              tunl0 10.244.2.0/32
#   10.244.2.0/26 via 203.0.113.10 dev tunl0 onlink     10.244.1.0/26 via 198.51.100.10 dev tunl0 onlink
#
# Asserts: the router has no route to the pods, pod-a pings pod-b, and the router sees the
# traffic as IP protocol 4 (IPIP) carrying the pod addresses.
set -euo pipefail

fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "--- $*"; }

for ns in node-a node-b router pod-a pod-b; do ip netns add "$ns"; done

step "underlay: node-a and node-b on two subnets, joined by the router"
ip link add a-up netns node-a type veth peer name r-a netns router
ip link add b-up netns node-b type veth peer name r-b netns router
ip -n node-a addr add 198.51.100.10/24 dev a-up
ip -n node-b addr add 203.0.113.10/24 dev b-up
ip -n router addr add 198.51.100.1/24 dev r-a
ip -n router addr add 203.0.113.1/24 dev r-b
for ns in node-a node-b router pod-a pod-b; do ip -n "$ns" link set lo up; done
ip -n node-a link set a-up up
ip -n node-b link set b-up up
ip -n router link set r-a up
ip -n router link set r-b up
ip -n node-a route add default via 198.51.100.1
ip -n node-b route add default via 203.0.113.1
ip netns exec router sysctl -qw net.ipv4.ip_forward=1

# node NS NODE_IP BLOCK TUNNEL_ADDR POD_IP POD_NS REMOTE_BLOCK REMOTE_NODE_IP
node() {
	local ns=$1 block=$2 tunnel=$3 pod=$4 podns=$5 rblock=$6 rnode=$7
	step "$ns: tunl0 $tunnel, pod $pod, $rblock via $rnode dev tunl0 onlink"
	ip netns exec "$ns" sysctl -qw net.ipv4.ip_forward=1
	ip -n "$ns" link show tunl0 >/dev/null || fail "$ns has no tunl0: is the ipip module loaded?"
	ip -n "$ns" link set tunl0 up
	ip -n "$ns" addr add "$tunnel/32" dev tunl0
	# rp_filter would drop decapsulated packets whose source is a remote pod.
	for c in all default tunl0; do ip netns exec "$ns" sysctl -qw "net.ipv4.conf.$c.rp_filter=0"; done

	# A pod wired the Calico way: /32 on eth0, default via a link-local gateway answered by
	# proxy ARP on the host side, and a /32 scope link route to it on the node.
	ip link add "cali-$podns" netns "$ns" type veth peer name eth0 netns "$podns"
	ip -n "$podns" addr add "$pod/32" dev eth0
	ip -n "$podns" link set eth0 up
	ip -n "$podns" route add 169.254.1.1 dev eth0 scope link
	ip -n "$podns" route add default via 169.254.1.1 dev eth0
	ip netns exec "$ns" sysctl -qw "net.ipv4.conf.cali-$podns.proxy_arp=1"
	ip netns exec "$ns" sysctl -qw "net.ipv4.neigh.cali-$podns.proxy_delay=0" # else up to 0.8 s per ARP
	ip -n "$ns" link set "cali-$podns" up
	ip -n "$ns" route add "$pod/32" dev "cali-$podns" scope link
	ip -n "$ns" route add blackhole "$block"

	ip -n "$ns" route add "$rblock" via "$rnode" dev tunl0 onlink
}
node node-a 10.244.1.0/26 10.244.1.0 10.244.1.5 pod-a 10.244.2.0/26 203.0.113.10
node node-b 10.244.2.0/26 10.244.2.0 10.244.2.5 pod-b 10.244.1.0/26 198.51.100.10

step "the router knows no pod route"
if ip -n router route get 10.244.2.5 >/dev/null 2>&1; then
	ip -n router route
	fail "router has a route to 10.244.2.5: the test would not prove encapsulation"
fi

step "capture IPIP on the router"
cap=$(mktemp -d)
ip netns exec router tcpdump -n -l -i any 'ip proto 4' >"$cap/out" 2>"$cap/err" &
tcpdump_pid=$!
for _ in $(seq 100); do
	grep -q 'listening on' "$cap/err" && break
	kill -0 "$tcpdump_pid" 2>/dev/null || { cat "$cap/err"; fail "tcpdump exited"; }
	sleep 0.1
done
grep -q 'listening on' "$cap/err" || { cat "$cap/err"; fail "tcpdump did not start listening in 10s"; }

step "pod-a (10.244.1.5) pings pod-b (10.244.2.5) across the router"
ip netns exec pod-a ping -c 3 -i 0.2 -w 10 10.244.2.5 || fail "pod-to-pod ping failed"

# tcpdump prints each packet as it is captured (-l): wait for the count rather than sleeping.
want=12 # 3 requests + 3 replies, each seen entering and leaving the router
for _ in $(seq 100); do
	[ "$(grep -c 'IP 10.244.1.5 > 10.244.2.5: ICMP echo request\|IP 10.244.2.5 > 10.244.1.5: ICMP echo reply' "$cap/out")" -ge "$want" ] && break
	sleep 0.1
done
kill -INT "$tcpdump_pid"
wait "$tcpdump_pid" || true
echo "router capture:"
cat "$cap/out"
requests=$(grep -c 'IP 198.51.100.10 > 203.0.113.10: IP 10.244.1.5 > 10.244.2.5: ICMP echo request' "$cap/out" || true)
replies=$(grep -c 'IP 203.0.113.10 > 198.51.100.10: IP 10.244.2.5 > 10.244.1.5: ICMP echo reply' "$cap/out" || true)
echo "router saw $requests encapsulated requests and $replies encapsulated replies (ip proto 4)"
[ "$requests" -ge 6 ] || fail "router saw $requests IPIP echo requests between the node IPs, want >= 6"
[ "$replies" -ge 6 ] || fail "router saw $replies IPIP echo replies between the node IPs, want >= 6"

echo "PASS: pod-to-pod over IPIP across a router with no pod routes"
