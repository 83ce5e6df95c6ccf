package tabbyctl_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/tabbyctl/vxlanview"
)

func TestFelixConfiguration(t *testing.T) {
	needCluster(t)
	f := writeFile(t, "felix.yaml", `apiVersion: tabby.dev/v1
kind: FelixConfiguration
metadata: {name: default}
spec:
  vxlanVNI: 4097
  vxlanMTU: 1400
`)
	if out := mustRun(t, "", "apply", "-f", f); !strings.Contains(out, `FelixConfiguration "default" created`) {
		t.Fatalf("apply: %s", out)
	}
	t.Cleanup(func() { run(t, "", "delete", "felixconfig", "default") })
	wantRows(t, mustRun(t, "", "get", "felixconfig"), [][]string{
		{"NAME", "VNI", "PORT", "MTU", "MTUV6"},
		{"default", "4097", "4789", "1400", "(uplink-70)"},
	})
	mustRun(t, "", "patch", "felixconfiguration", "default", "-p", `{"spec":{"vxlanPort":8472}}`)
	if c, err := env.Client.FelixConfigurations().Get(context.Background(), "default"); err != nil || *c.Spec.VXLANPort != 8472 || *c.Spec.VXLANVNI != 4097 {
		t.Fatalf("after patch: %+v %v", c, err)
	}
	r := run(t, "", "apply", "-f", writeFile(t, "bad.yaml", `apiVersion: tabby.dev/v1
kind: FelixConfiguration
metadata: {name: other}
spec: {vxlanVNI: 16777216}
`))
	for _, want := range []string{
		`bad.yaml: document 1 (FelixConfiguration "other"): metadata.name: Invalid value: "other": is not allowed`,
		`bad.yaml: document 1 (FelixConfiguration "other"): spec.vxlanVNI: Invalid value: 16777216`,
	} {
		if r.code == 0 || !strings.Contains(r.stderr, want) {
			t.Errorf("stderr %q lacks %q", r.stderr, want)
		}
	}
	if r := run(t, "", "patch", "felixconfig", "default", "-p", `{"spec":{"vxlanPort":0}}`); r.code == 0 || !strings.Contains(r.stderr, "spec.vxlanPort") {
		t.Errorf("invalid patch: exit %d stderr %q", r.code, r.stderr)
	}
}

// The VXLAN peers of a small cluster, from its API objects: two nodes with their VTEPs and
// MACs, a third without a MAC, a VXLAN pool (shown by get -o wide) and their blocks.
func TestNodeDataplane(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	mustRun(t, "", "create", "-f", writeFile(t, "pools.yaml", `apiVersion: tabby.dev/v1
kind: IPPool
metadata: {name: dp-vxlan}
spec: {cidr: 10.244.224.0/20, vxlanMode: CrossSubnet}
`))
	t.Cleanup(func() { run(t, "", "delete", "ippool", "dp-vxlan") })
	wantRows(t, mustRun(t, "", "get", "ippool", "dp-vxlan", "-o", "wide"), [][]string{
		{"NAME", "CIDR", "SELECTOR", "NAT", "IPIPMODE", "VXLANMODE", "DISABLED", "BLOCKSIZE"},
		{"dp-vxlan", "10.244.224.0/20", "all()", "false", "Never", "CrossSubnet", "false", "26"},
	})
	createNode(t, "dp-a", nil, map[string]string{v1.AnnotationBGPIPv4Address: "198.51.100.31/24",
		v1.AnnotationVXLANIPv4TunnelAddress: "10.244.224.0", v1.AnnotationVXLANIPv4MAC: "66:00:00:00:00:0a"})
	createNode(t, "dp-b", nil, map[string]string{v1.AnnotationBGPIPv4Address: "198.51.100.32/24",
		v1.AnnotationVXLANIPv4TunnelAddress: "10.244.224.64", v1.AnnotationVXLANIPv4MAC: "66:00:00:00:00:0b"})
	createNode(t, "dp-c", nil, map[string]string{v1.AnnotationBGPIPv4Address: "203.0.113.33/24",
		v1.AnnotationVXLANIPv4TunnelAddress: "10.244.224.128"})
	for _, b := range []struct{ name, cidr, node string }{
		{"10-244-224-0-26", "10.244.224.0/26", "dp-a"}, {"10-244-224-64-26", "10.244.224.64/26", "dp-b"}, {"10-244-224-128-26", "10.244.224.128/26", "dp-c"},
	} {
		if _, err := env.Client.IPAMBlocks().Create(ctx, &v1.IPAMBlock{ObjectMeta: metav1.ObjectMeta{Name: b.name},
			Spec: v1.IPAMBlockSpec{CIDR: b.cidr, Affinity: v1.AffinityPrefixHost + b.node}}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.IPAMBlocks().Delete(context.Background(), b.name, metav1.DeleteOptions{}) })
	}

	out := mustRun(t, "", "node", "dataplane", "--node", "dp-a")
	for _, want := range []string{
		"IPv4 VXLAN (vxlan.tabby) as node dp-a programs it",
		"NODE VTEP MAC UNDERLAY BLOCKS NATIVE MISSING",
		// dp-b is on dp-a's subnet: CrossSubnet routes its block natively.
		"dp-b 10.244.224.64 66:00:00:00:00:0b 198.51.100.32 - 10.244.224.64/26 -",
		"dp-c 10.244.224.128 - 203.0.113.33 10.244.224.128/26 - no MAC (tabby.dev/vxlan-ipv4-mac)",
	} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), want) {
			t.Errorf("node dataplane lacks %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "dp-a" {
			t.Errorf("the viewer's own row is shown:\n%s", out)
		}
	}
	var view vxlanview.View
	if err := json.Unmarshal([]byte(mustRun(t, "", "node", "dataplane", "-o", "json")), &view); err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, f := range view.Families {
		for _, p := range f.Peers {
			if p.Node == "dp-a" && f.Family == "IPv4" && p.VTEP.String() == "10.244.224.0" && p.MAC == "66:00:00:00:00:0a" && len(p.Blocks) == 1 && p.Blocks[0].String() == "10.244.224.0/26" {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("-o json lacks dp-a's IPv4 VTEP: %+v", view)
	}
	if r := run(t, "", "node", "dataplane", "--node", "dp-missing"); r.code == 0 || !strings.Contains(r.stderr, `no Node "dp-missing"`) {
		t.Errorf("unknown node: exit %d stderr %q", r.code, r.stderr)
	}
	// The node view shows the VTEP and MAC tabby-node recorded.
	if y := mustRun(t, "", "get", "node", "dp-a", "-o", "yaml"); !strings.Contains(y, "ipv4VXLANTunnelAddr: 10.244.224.0") || !strings.Contains(y, "vxlanTunnelMACAddr: 66:00:00:00:00:0a") {
		t.Errorf("node yaml lacks the VTEP:\n%s", y)
	}
}
