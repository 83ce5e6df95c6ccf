package cluster

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/tabbynet/tabby/internal/testenv"
)

// The DNS Service's address is one the API server hands out, and CoreDNS is configured as the
// cluster's only resolver: no forwarding to the machine's, every file it reads mounted.
func TestDNSConfig(t *testing.T) {
	ip := netip.MustParseAddr(DNSServiceIP)
	if !netip.MustParsePrefix(testenv.ServiceCIDR).Contains(ip) {
		t.Errorf("DNSServiceIP %s outside the Service CIDR %s", ip, testenv.ServiceCIDR)
	}
	if strings.Contains(corefile, "forward") {
		t.Errorf("the Corefile forwards queries:\n%s", corefile)
	}
	d := dnsDeployment()
	mounted := map[string]bool{}
	for _, it := range d.Spec.Template.Spec.Volumes[0].ConfigMap.Items {
		mounted["/etc/coredns/"+it.Path] = true
	}
	for _, f := range []string{"/etc/coredns/Corefile", "/etc/coredns/db.root"} {
		if !mounted[f] {
			t.Errorf("%s not mounted (%v)", f, mounted)
		}
		if f != "/etc/coredns/Corefile" && !strings.Contains(corefile, f) {
			t.Errorf("the Corefile does not read %s", f)
		}
	}
}
