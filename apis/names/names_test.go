package names

import (
	"net/netip"
	"testing"

	"github.com/tabbynet/tabby/internal/ipfamily"
)

func TestHostVethName(t *testing.T) {
	// sha1("default.nginx") = 1f1b8c6ec3d7...; the name is cali + 11 hex digits.
	got := HostVethName("default", "nginx", "abc")
	if len(got) != 15 || got[:4] != "cali" {
		t.Fatalf("HostVethName = %q, want cali + 11 hex digits", got)
	}
	if got != HostVethName("default", "nginx", "other-container") {
		t.Fatalf("the name must depend on the pod, not the container, when the pod is known")
	}
	if HostVethName("", "", "c1") == HostVethName("", "", "c2") {
		t.Fatalf("without a pod identity the container ID must tell interfaces apart")
	}
	if HostVethName("a", "b.c", "") == HostVethName("a.b", "c", "x") {
		// Calico has the same ambiguity; documented, not fixed: namespaces cannot contain '.'.
		t.Log("namespace 'a' pod 'b.c' and namespace 'a.b' pod 'c' share a name (as in Calico)")
	}
}

func TestObjectNames(t *testing.T) {
	b := netip.MustParsePrefix("10.244.1.64/26")
	if got := BlockName(b); got != "10-244-1-64-26" {
		t.Fatalf("BlockName = %q", got)
	}
	for cidr, want := range map[string]string{
		"fd00:10:244::40/122":       "fd00-10-244--40-122",
		"fd00:10:244:0:1:2:3:0/116": "fd00-10-244-0-1-2-3-0-116",
		"::40/122":                  "0--40-122",
	} {
		if got := BlockName(netip.MustParsePrefix(cidr)); got != want {
			t.Errorf("BlockName(%s) = %q, want %q", cidr, got, want)
		}
	}
	if got := AffinityName("node-a", b); got != "node-a-10-244-1-64-26" {
		t.Fatalf("AffinityName = %q", got)
	}
	if got := HandleName("k8s-pod-network.0123abcd"); got != "k8s-pod-network.0123abcd" {
		t.Fatalf("a safe handle must keep its name, got %q", got)
	}
	a, c := HandleName("My_Net.abc"), HandleName("my-net.abc")
	if a == c {
		t.Fatalf("distinct handles %q and %q must not share an object name", "My_Net.abc", "my-net.abc")
	}
}

// A node's VXLAN MAC is its own per family, the same every time (a re-created Node gets it
// again), unicast and locally administered.
func TestVXLANMAC(t *testing.T) {
	seen := map[[6]byte]string{}
	for _, node := range []string{"node-a", "node-b", "node-a1", ""} {
		for _, fam := range ipfamily.All {
			mac := VXLANMAC(node, fam)
			if mac != VXLANMAC(node, fam) {
				t.Fatalf("%s %s: not stable", node, fam)
			}
			if mac[0]&0x01 != 0 || mac[0]&0x02 == 0 {
				t.Errorf("%s %s: %x is not a unicast, locally administered MAC", node, fam, mac)
			}
			key := node + "/" + fam.String()
			if other, ok := seen[mac]; ok {
				t.Errorf("%s and %s share MAC %x", key, other, mac)
			}
			seen[mac] = key
		}
	}
	if VXLANTunnelHandle("n1", ipfamily.IPv4) == VXLANTunnelHandle("n1", ipfamily.IPv6) || VXLANTunnelHandle("n1", ipfamily.IPv4) == TunnelHandle("n1") {
		t.Error("the tunnels' handles of one node must differ")
	}
}
