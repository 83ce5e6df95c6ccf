package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"reflect"
	"syscall"
	"testing"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/ipam"
	"github.com/tabbynet/tabby/ipam/ipamtest"
	"github.com/tabbynet/tabby/ipam/rpc/api"
)

// The implementation side of "adding a method": a field of api.Service that NewLocal leaves nil
// would reach tabby-node and the direct path as "not implemented". The client side needs
// nothing per method (api TestEveryMethodCrossesTheSocket).
func TestLocalImplementsEveryMethod(t *testing.T) {
	svc := reflect.ValueOf(NewLocal(ipam.New(ipamtest.NewStore(), ipam.Config{})))
	for i := range svc.NumField() {
		if svc.Field(i).IsNil() {
			t.Errorf("api.Service.%s has no implementation in NewLocal", svc.Type().Field(i).Name)
		}
	}
	direct := reflect.ValueOf(lockedWrites(NewLocal(ipam.New(ipamtest.NewStore(), ipam.Config{})), t.TempDir()+"/lock"))
	for i := range direct.NumField() {
		if direct.Field(i).IsNil() {
			t.Errorf("the direct path lost api.Service.%s", direct.Type().Field(i).Name)
		}
	}
}

// classify maps the allocator's sentinels to the service's kinds (decision logic over the ipam
// fake store).
func TestClassifyAllocatorErrors(t *testing.T) {
	ctx := context.Background()
	s := ipamtest.NewStore()
	s.AddNode("a", nil)
	l := NewLocal(ipam.New(s, ipam.Config{CacheTTL: -1}))

	if _, err := l.Assign(ctx, &api.AssignRequest{Handle: "n.1", Node: "a"}); !errors.Is(err, api.ErrNoPool) {
		t.Errorf("no pools: %v, want ErrNoPool", err)
	}
	s.AddPool("tiny", "10.244.200.0/31", 31)
	for i := range 2 {
		if _, err := l.Assign(ctx, &api.AssignRequest{Handle: "n.fill" + string(rune('a'+i)), Node: "a"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Assign(ctx, &api.AssignRequest{Handle: "n.2", Node: "a"}); !errors.Is(err, api.ErrExhausted) {
		t.Errorf("full pool: %v, want ErrExhausted", err)
	}
	if _, err := l.Assign(ctx, &api.AssignRequest{Handle: "", Node: "a"}); !errors.Is(err, api.ErrInvalid) {
		t.Errorf("no handle: %v, want ErrInvalid", err)
	}
	s.Inject(func(ipamtest.Op, string) error {
		return &url.Error{Op: "Get", URL: "https://127.0.0.1:6443", Err: syscall.ECONNREFUSED}
	})
	if _, err := l.Assign(ctx, &api.AssignRequest{Handle: "n.3", Node: "a"}); !errors.Is(err, api.ErrUnavailable) {
		t.Errorf("API server down: %v, want ErrUnavailable", err)
	}
	if _, err := l.Ready(ctx, &api.ReadyRequest{Node: "a"}); !errors.Is(err, api.ErrUnavailable) {
		t.Errorf("Ready with the API server down: %v, want ErrUnavailable", err)
	}
}

func TestGCKeepsValidAndOtherNodes(t *testing.T) {
	ctx := context.Background()
	s := ipamtest.NewStore()
	s.AddNode("a", nil)
	s.AddNode("b", nil)
	s.AddPool("p", "10.244.0.0/24", 26)
	l := NewLocal(ipam.New(s, ipam.Config{}))
	for _, r := range []api.AssignRequest{
		{Handle: "net.keep", Node: "a"}, {Handle: "net.orphan", Node: "a"},
		{Handle: "net.other", Node: "b"}, {Handle: "othernet.x", Node: "a"},
	} {
		if _, err := l.Assign(ctx, &r); err != nil {
			t.Fatal(err)
		}
	}
	out, err := l.GC(ctx, &api.GCRequest{Node: "a", Network: "net", Keep: []string{"net.keep"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Released) != 1 || out.Released[0] != "net.orphan" {
		t.Fatalf("released %v, want only net.orphan", out.Released)
	}
	for _, h := range []string{"net.keep", "net.other", "othernet.x"} {
		if got, _ := l.Lookup(ctx, &api.LookupRequest{Handle: h}); len(got.Assignments) != 1 {
			t.Errorf("%s lost its address", h)
		}
	}
	rel, err := l.Release(ctx, &api.ReleaseRequest{Handle: "net.keep", WantReleased: true})
	if err != nil || len(rel.Released) != 1 {
		t.Fatalf("release with WantReleased: %+v %v", rel, err)
	}
}

// A dual-stack node: a current client gets an address of each family; a request from a plugin
// binary that predates dual stack (no MultiFamily) gets its IPv4 address only, so the handle
// holds nothing the pod is never given.
func TestAssignFamiliesByClient(t *testing.T) {
	ctx := context.Background()
	s := ipamtest.NewStore()
	s.AddNode("a", nil)
	s.AddPool("v4", "10.244.0.0/24", 26)
	s.AddPool("v6", "fd00:10:244::/120", 122)
	l := NewLocal(ipam.New(s, ipam.Config{}))
	r, err := l.Assign(ctx, &api.AssignRequest{Handle: "net.new", Node: "a", MultiFamily: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Assignments) != 2 || !r.Assignments[0].IP.Is4() || !r.Assignments[1].IP.Is6() || r.Assignment != r.Assignments[0] {
		t.Fatalf("current client: %+v, want IPv4 then IPv6", r)
	}
	old, err := l.Assign(ctx, &api.AssignRequest{Handle: "net.old", Node: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if len(old.All()) != 1 || !old.Assignment.IP.Is4() {
		t.Fatalf("old client: %+v, want one IPv4 address", old)
	}
	held, err := l.Lookup(ctx, &api.LookupRequest{Handle: "net.old", Node: "a"})
	if err != nil || len(held.Assignments) != 1 {
		t.Fatalf("old client's handle holds %+v (%v), want its one IPv4 address", held, err)
	}
	// An old client on an IPv6-only node gets IPv4's error, not an address it cannot use.
	s2 := ipamtest.NewStore()
	s2.AddNode("a", nil)
	s2.AddPool("v6", "fd00:10:244::/120", 122)
	if _, err := NewLocal(ipam.New(s2, ipam.Config{})).Assign(ctx, &api.AssignRequest{Handle: "net.old6", Node: "a"}); !errors.Is(err, api.ErrNoPool) {
		t.Fatalf("old client, IPv6-only node: %v, want ErrNoPool", err)
	}
}

// What the pod's MTU needs reaches the plugin: each pool's encapsulation overhead (none
// natively, 20 for IPIP, 50 for VXLAN over IPv4, 70 over IPv6), and for a plugin of the release
// before, which reads only "ipip", that the pool encapsulates.
func TestAssignmentCarriesTheOverhead(t *testing.T) {
	ctx := context.Background()
	s := ipamtest.NewStore()
	s.AddNode("a", nil)
	s.AddPool("native", "10.244.0.0/24", 26)
	s.AddPool("ipip", "10.244.1.0/24", 26, func(p *v1.IPPool) { p.Spec.IPIPMode = v1.IPIPModeCrossSubnet })
	s.AddPool("vxlan", "10.244.2.0/24", 26, func(p *v1.IPPool) { p.Spec.VXLANMode = v1.VXLANModeAlways })
	s.AddPool("vxlan6", "fd00:10:244::/120", 122, func(p *v1.IPPool) { p.Spec.VXLANMode = v1.VXLANModeCrossSubnet })
	l := NewLocal(ipam.New(s, ipam.Config{}))
	for pool, want := range map[string]int{"native": 0, "ipip": 20, "vxlan": 50, "vxlan6": 70} {
		r, err := l.Assign(ctx, &api.AssignRequest{Handle: "net." + pool, Node: "a", Pools: []string{pool}, MultiFamily: true})
		if err != nil || len(r.Assignments) != 1 {
			t.Fatalf("%s: %+v %v", pool, r, err)
		}
		if got := r.Assignments[0].EncapOverhead(); got != want {
			t.Errorf("%s: overhead %d, want %d", pool, got, want)
		}
		held, err := l.Lookup(ctx, &api.LookupRequest{Handle: "net." + pool, Node: "a"})
		if err != nil || len(held.Assignments) != 1 || held.Assignments[0].EncapOverhead() != want {
			t.Errorf("%s: Lookup says %+v %v, want overhead %d", pool, held, err, want)
		}
		wire, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var older struct {
			Assignment struct {
				IPIP bool `json:"ipip"`
			} `json:"assignment"`
		}
		if err := json.Unmarshal(wire, &older); err != nil || older.Assignment.IPIP != (want > 0) {
			t.Errorf("%s: a plugin of the release before reads ipip=%v from %s, want %v", pool, older.Assignment.IPIP, wire, want > 0)
		}
	}
}
