package tabbyctl_test

import (
	"strings"
	"testing"
)

// TestBGPFilter: an operator applies a BGPFilter and a BGPPeer that uses it, lists the filter
// and sees the peer's filters; a bad rule is refused before anything is written, naming the
// file, the field and the value.
func TestBGPFilter(t *testing.T) {
	needCluster(t)
	f := writeFile(t, "filter.yaml", `apiVersion: tabby.dev/v1
kind: BGPFilter
metadata: {name: tor-rack1}
spec:
  importV4:
    - {action: Accept, matchOperator: Equal, cidr: 0.0.0.0/0}
  exportV4:
    - {action: Reject, matchOperator: In, cidr: 10.244.128.0/17, prefixLength: {min: 17, max: 32}}
  exportV6:
    - {action: Reject, matchOperator: Equal, cidr: "fd00:10:244::/122"}
---
apiVersion: tabby.dev/v1
kind: BGPPeer
metadata: {name: filtered-tor}
spec: {peerIP: 198.51.100.1, asNumber: 65001, filters: [tor-rack1]}
`)
	mustRun(t, "", "apply", "-f", f)
	t.Cleanup(func() { run(t, "", "delete", "-f", f) })
	wantRows(t, mustRun(t, "", "get", "bgpfilters"), [][]string{
		{"NAME", "IMPORTV4", "EXPORTV4", "IMPORTV6", "EXPORTV6"},
		{"tor-rack1", "1", "1", "0", "1"},
	})
	if out := mustRun(t, "", "get", "bgppeer", "filtered-tor", "-o", "wide"); !strings.Contains(out, "tor-rack1") {
		t.Fatalf("get bgppeer -o wide does not show the peer's filters:\n%s", out)
	}
	if y := mustRun(t, "", "get", "bgpf", "tor-rack1", "-o", "yaml"); !strings.Contains(y, "cidr: 10.244.128.0/17") || !strings.Contains(y, "max: 32") {
		t.Fatalf("get -o yaml:\n%s", y)
	}
	r := run(t, "", "apply", "-f", writeFile(t, "bad.yaml", `apiVersion: tabby.dev/v1
kind: BGPFilter
metadata: {name: bad}
spec:
  importV4:
    - {action: Accept, matchOperator: In, cidr: "2001:db8::/32"}
`))
	want := `bad.yaml: document 1 (BGPFilter "bad"): spec.importV4[0].cidr: Invalid value: "2001:db8::/32": is not an IPv4 CIDR`
	if r.code == 0 || !strings.Contains(r.stderr, want) {
		t.Fatalf("exit %d stderr %q, want %q", r.code, r.stderr, want)
	}
}
