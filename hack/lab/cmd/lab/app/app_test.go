package app

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/tabbynet/tabby/hack/lab"
)

// The demo's suggestions: an IPv6 traceroute in a dual-stack lab, and a policy check naming the
// node's namespace as `ip netns list` prints it (the form tabbyctl takes).
func TestLookAround(t *testing.T) {
	node := &lab.Node{Name: "node-1", NS: "tl-ab12-node-1", RunDir: "/run/tabby-lab/ab12/nodes/node-1/run"}
	pods := []*lab.Pod{
		{Name: "pod-1-1", NS: "tl-ab12-pod-1-1", IP: netip.MustParseAddr("10.244.0.1"), IP6: netip.MustParseAddr("fd00:10:244::1")},
		{Name: "pod-3-2", NS: "tl-ab12-pod-3-2", IP: netip.MustParseAddr("10.244.0.65"), IP6: netip.MustParseAddr("fd00:10:244::41")},
	}
	dual := lookAround(DemoOptions{Families: lab.DualStack}, "ab12", "/kc", "kubectl", node, pods)
	for _, want := range []string{
		"# a shell in pod pod-1-1 (10.244.0.1, fd00:10:244::1)\n",
		"ip netns exec tl-ab12-pod-1-1 traceroute -n 10.244.0.65   # real hops",
		"ip netns exec tl-ab12-pod-1-1 traceroute -n fd00:10:244::41   # the same over IPv6\n",
		"export KUBECONFIG=/kc\n",
		"bin/tabbyctl policy check --node node-1 --netns tl-ab12-node-1   #",
		"bin/tabbyctl node status --socket /run/tabby-lab/ab12/nodes/node-1/run/bird.sock\n",
		"ip netns list | grep tl-ab12\n",
		"bin/tabbyctl flows --verdict deny --follow   #",
	} {
		if !strings.Contains(dual, want) {
			t.Errorf("dual-stack demo hints lack %q:\n%s", want, dual)
		}
	}
	for _, p := range pods {
		p.IP6 = netip.Addr{}
	}
	if v4 := lookAround(DemoOptions{Families: lab.IPv4Only}, "ab12", "/kc", "kubectl", node, pods); strings.Contains(v4, "over IPv6") {
		t.Errorf("IPv4 demo hints suggest IPv6:\n%s", v4)
	}
}
