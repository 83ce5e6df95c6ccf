package validation

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/tabbynet/tabby/apis/names"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/testenv"
)

// TestAPIServerAgrees runs the shared case table through the real API server: the CRD schema must
// accept exactly what this package accepts and refuse the rest naming the same field.
func TestAPIServerAgrees(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real API server")
	}
	env := testenv.Start(t)
	ctx := context.Background()
	for _, tc := range Cases {
		t.Run(tc.Name, func(t *testing.T) {
			err := create(ctx, env, tc.Obj.DeepCopyObject())
			switch {
			case tc.Field == "" && err != nil:
				t.Fatalf("API server refused a valid object: %v", err)
			case tc.Field != "" && err == nil:
				t.Fatalf("API server accepted an object that must be refused for %s", tc.Field)
			case tc.Field != "" && !apierrors.IsInvalid(err):
				t.Fatalf("want an Invalid error naming %s, got %v", tc.Field, err)
			case tc.Field != "" && !strings.Contains(err.Error(), tc.Field):
				t.Fatalf("refusal %q does not name %s", err, tc.Field)
			}
		})
	}
}

func create(ctx context.Context, env *testenv.Env, obj runtime.Object) error {
	var err error
	switch o := obj.(type) {
	case *v1.IPPool:
		_, err = env.Client.IPPools().Create(ctx, o)
	case *v1.BGPPeer:
		_, err = env.Client.BGPPeers().Create(ctx, o)
	case *v1.BGPConfiguration:
		// A singleton: the next valid one needs the name again.
		if _, err = env.Client.BGPConfigurations().Create(ctx, o); err == nil {
			err = env.Client.BGPConfigurations().Delete(ctx, o.Name, metav1.DeleteOptions{})
		}
	case *v1.FelixConfiguration:
		_, err = env.Client.FelixConfigurations().Create(ctx, o)
	case *v1.BGPFilter:
		_, err = env.Client.BGPFilters().Create(ctx, o)
	}
	return err
}

// TestRoundTrip writes every kind and reads it back unchanged, defaults applied by the server.
func TestRoundTrip(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real API server")
	}
	env := testenv.Start(t)
	ctx := context.Background()
	c := env.Client
	meta := metav1.ObjectMeta{Name: "rt"}

	// The server defaults ipipMode; blockSize depends on the family, which a schema default
	// cannot see, so the typed pool applies it.
	for _, tc := range []struct {
		name, cidr string
		blockSize  int
	}{{"rt", "10.244.0.0/16", 26}, {"rt6", "fd00:10:244::/48", 122}} {
		pool, err := c.IPPools().Create(ctx, &v1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: tc.name}, Spec: v1.IPPoolSpec{CIDR: tc.cidr, NATOutgoing: true}})
		if err != nil {
			t.Fatal(err)
		}
		if pool.Spec.IPIPMode != v1.IPIPModeNever {
			t.Fatalf("%s: ipipMode not defaulted: %q", tc.cidr, pool.Spec.IPIPMode)
		}
		got, err := c.IPPools().Get(ctx, tc.name)
		if err != nil || !reflect.DeepEqual(got.Spec, pool.Spec) {
			t.Fatalf("IPPool round trip: %+v, %v", got, err)
		}
		typed, errs := ParseIPPool(got)
		if len(errs) > 0 || typed.BlockSize != tc.blockSize || typed.CIDR.String() != tc.cidr {
			t.Fatalf("%s: typed pool %+v %v, want blockSize %d", tc.cidr, typed, errs, tc.blockSize)
		}
	}

	cfg, err := c.BGPConfigurations().Create(ctx, &v1.BGPConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "default"}})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Spec.ASNumber == nil || *cfg.Spec.ASNumber != 64512 || cfg.Spec.NodeToNodeMeshEnabled == nil || !*cfg.Spec.NodeToNodeMeshEnabled || *cfg.Spec.ListenPort != 179 ||
		cfg.Spec.MaxPaths == nil || *cfg.Spec.MaxPaths != v1.DefaultMaxPaths {
		t.Fatalf("BGPConfiguration defaults: %+v", cfg.Spec)
	}

	peer, err := c.BGPPeers().Create(ctx, &v1.BGPPeer{ObjectMeta: meta, Spec: v1.BGPPeerSpec{
		PeerIP: "198.51.100.1:1179", ASNumber: 4200000000, NodeSelector: "has(tabby.dev/route-reflector)",
		Password: &v1.BGPPassword{SecretKeyRef: &v1.SecretKeyRef{Name: "tor", Key: "password"}}, EBGPMultihop: 2,
		MaxRestartTime: &metav1.Duration{Duration: 90e9}, KeepOriginalNextHop: true,
	}})
	if err != nil {
		t.Fatal(err)
	}
	if peer.Spec.ASNumber != 4200000000 || peer.Spec.Password.SecretKeyRef.Key != "password" || peer.Spec.MaxRestartTime.Duration != 90e9 {
		t.Fatalf("BGPPeer round trip: %+v", peer.Spec)
	}

	block, err := c.IPAMBlocks().Create(ctx, &v1.IPAMBlock{ObjectMeta: metav1.ObjectMeta{Name: "10-244-0-0-26"}, Spec: v1.IPAMBlockSpec{
		CIDR: "10.244.0.0/26", Affinity: "host:node-a",
		Allocations: map[string]v1.Allocation{"3": {Handle: "net.abc", Namespace: "default", Pod: "web", Node: "node-a"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	block.Spec.Allocations["4"] = v1.Allocation{Handle: "net.def"}
	stale := block.DeepCopy()
	if _, err := c.IPAMBlocks().Update(ctx, block); err != nil {
		t.Fatalf("update block: %v", err)
	}
	// A write from a stale read must fail: IPAM's compare-and-swap rests on this.
	stale.Spec.Allocations["4"] = v1.Allocation{Handle: "net.other"}
	if _, err := c.IPAMBlocks().Update(ctx, stale); !apierrors.IsConflict(err) {
		t.Fatalf("stale update: want Conflict, got %v", err)
	}

	if _, err := c.BlockAffinities().Create(ctx, &v1.BlockAffinity{ObjectMeta: metav1.ObjectMeta{Name: "node-a-10-244-0-0-26"}, Spec: v1.BlockAffinitySpec{Node: "node-a", CIDR: "10.244.0.0/26"}}); err != nil {
		t.Fatal(err)
	}
	aff, err := c.BlockAffinities().Get(ctx, "node-a-10-244-0-0-26")
	if err != nil || aff.Spec.State != v1.AffinityPending {
		t.Fatalf("BlockAffinity default state: %+v %v", aff, err)
	}
	if _, err := c.IPAMHandles().Create(ctx, &v1.IPAMHandle{ObjectMeta: metav1.ObjectMeta{Name: "net.abc"}, Spec: v1.IPAMHandleSpec{HandleID: "net.abc", Block: map[string]int{"10.244.0.0/26": 1}}}); err != nil {
		t.Fatal(err)
	}
	// IPv6 blocks and affinities: the same objects, the name made DNS-safe, the cidr canonical.
	b6 := netip.MustParsePrefix("fd00:10:244::40/122")
	if _, err := c.IPAMBlocks().Create(ctx, &v1.IPAMBlock{ObjectMeta: metav1.ObjectMeta{Name: names.BlockName(b6)}, Spec: v1.IPAMBlockSpec{
		CIDR: b6.String(), Affinity: "host:node-a", Allocations: map[string]v1.Allocation{"63": {Handle: "net.abc"}},
	}}); err != nil {
		t.Fatalf("IPv6 block: %v", err)
	}
	if _, err := c.BlockAffinities().Create(ctx, &v1.BlockAffinity{ObjectMeta: metav1.ObjectMeta{Name: names.AffinityName("node-a", b6)}, Spec: v1.BlockAffinitySpec{Node: "node-a", CIDR: b6.String()}}); err != nil {
		t.Fatalf("IPv6 affinity: %v", err)
	}
	if _, err := c.IPAMBlocks().Create(ctx, &v1.IPAMBlock{ObjectMeta: metav1.ObjectMeta{Name: "hostbits"}, Spec: v1.IPAMBlockSpec{CIDR: "fd00:10:244::41/122"}}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.cidr") {
		t.Fatalf("an IPv6 block with host bits set: want Invalid naming spec.cidr, got %v", err)
	}
	for _, del := range []func() error{
		func() error { return c.IPAMHandles().Delete(ctx, "net.abc", metav1.DeleteOptions{}) },
		func() error { return c.IPAMBlocks().Delete(ctx, "10-244-0-0-26", metav1.DeleteOptions{}) },
	} {
		if err := del(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestKubectlRefusesBadPool is what an operator sees: kubectl apply of a bad pool fails and names
// the field.
func TestKubectlRefusesBadPool(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real API server")
	}
	kubectl := filepath.Join(testenv.BinDir(), "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		t.Fatalf("kubectl not built (%v): run make controlplane", err)
	}
	env := testenv.Start(t)
	for _, tc := range []struct{ manifest, field string }{
		{"apiVersion: tabby.dev/v1\nkind: IPPool\nmetadata: {name: bad}\nspec: {cidr: 10.244.0.0/16, blockSize: 19}\n", "spec.blockSize"},
		{"apiVersion: tabby.dev/v1\nkind: IPPool\nmetadata: {name: bad}\nspec: {cidr: 10.244.0.0/16, ipipMode: Sometimes}\n", "spec.ipipMode"},
		{"apiVersion: tabby.dev/v1\nkind: IPPool\nmetadata: {name: bad}\nspec: {cidr: 'fd00:10:244::/48', ipipMode: Always}\n", "spec.ipipMode"},
		{"apiVersion: tabby.dev/v1\nkind: IPPool\nmetadata: {name: bad}\nspec: {cidr: 'fd00:10:244::/48', blockSize: 26}\n", "spec.blockSize"},
		{"apiVersion: tabby.dev/v1\nkind: BGPPeer\nmetadata: {name: bad}\nspec: {peerIP: not-an-ip, asNumber: 65001}\n", "spec.peerIP"},
		{"apiVersion: tabby.dev/v1\nkind: BGPFilter\nmetadata: {name: bad}\nspec: {importV4: [{action: Accept, matchOperator: In, cidr: '2001:db8::/32'}]}\n", "spec.importV4[0].cidr: Invalid value: \"2001:db8::/32\": cidr: 2001:db8::/32 is not a canonical IPv4 CIDR"},
		{"apiVersion: tabby.dev/v1\nkind: BGPConfiguration\nmetadata: {name: default}\nspec: {communities: [{name: mine, value: '0:201'}]}\n", "spec.communities[0].value"},
		// A Calico rule field tabby does not implement is refused, never dropped: the rule would
		// match more than its author meant.
		{"apiVersion: tabby.dev/v1\nkind: BGPFilter\nmetadata: {name: calico}\nspec: {exportV4: [{action: Reject, peerType: iBGP}]}\n", "peerType"},
	} {
		cmd := exec.Command(kubectl, "--kubeconfig", env.Kubeconfig, "apply", "-f", "-")
		cmd.Stdin = strings.NewReader(tc.manifest)
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("kubectl apply accepted:\n%s", tc.manifest)
		}
		if !strings.Contains(string(out), tc.field) {
			t.Fatalf("kubectl's refusal does not name %s:\n%s", tc.field, out)
		}
		t.Logf("kubectl: %s", strings.TrimSpace(string(out)))
	}
}
