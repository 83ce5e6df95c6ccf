package calc

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	v1 "github.com/tabbynet/tabby/apis/v1"
)

func TestIndexWorkloadsMatchesCompute(t *testing.T) {
	ws := []Workload{
		{IP: addr("10.244.0.5"), Interface: "calib"},
		{IP: addr("10.244.0.5"), Interface: "calia"}, // duplicate: calia wins whatever the order
		{IP: addr("10.244.0.5"), Interface: "calic"},
		{IP: addr("10.244.0.6"), Interface: ""},             // no interface
		{IP: addr("fd00:10:244::6"), Interface: "calid"},    // IPv6: a /128
		{IP: addr("::ffff:10.244.0.7"), Interface: "calie"}, // IPv4-mapped IPv6 is neither family
		{IP: addr("10.244.0.8"), Interface: "calif"},
	}
	reused := WorkloadIndex{addr("10.244.9.9"): "stale"}
	idx, problems := IndexWorkloads(ws, reused)
	want := WorkloadIndex{addr("10.244.0.5"): "calia", addr("10.244.0.8"): "calif", addr("fd00:10:244::6"): "calid"}
	if !maps.Equal(idx, want) {
		t.Fatalf("index %v, want %v", idx, want)
	}
	if len(problems) != 4 {
		t.Fatalf("problems %q, want 4 (two duplicates, two invalid)", problems)
	}
	reversed := slices.Clone(ws)
	slices.Reverse(reversed)
	if again, _ := IndexWorkloads(reversed, nil); !maps.Equal(again, want) {
		t.Fatalf("order-dependent index %v", again)
	}
	// Compute indexes the same way, and takes a caller's index instead when given one.
	in := baseInput()
	in.Workloads = ws
	plain := Compute(in)
	in.WorkloadIndex = idx
	in.Workloads = nil
	indexed := Compute(in)
	if !maps.Equal(plain.Routes, indexed.Routes) || len(plain.Routes) != 3 {
		t.Fatalf("routes differ: plain %v indexed %v", plain.Routes, indexed.Routes)
	}
	if !slices.Equal(plain.Problems, problems) || len(indexed.Problems) != 0 {
		t.Fatalf("problems: plain %q indexed %q", plain.Problems, indexed.Problems)
	}
}

// equivalenceInput has every kind of route a workload address can meet: a local block holding
// the workloads, a local /32 block, a borrowed /32 learned by BGP, an unresolvable BGP /32 and
// one outside every pool.
func equivalenceInput() Input {
	in := baseInput()
	in.Pools = []Pool{
		{Name: "pods", CIDR: pfx("10.244.0.0/16"), IPIPMode: v1.IPIPModeNever},
		{Name: "cross", CIDR: pfx("10.244.200.0/24"), IPIPMode: v1.IPIPModeCrossSubnet},
	}
	in.LocalBlocks = []netip.Prefix{pfx("10.244.0.0/26"), pfx("10.244.0.60/32")}
	in.BGPRoutes = map[netip.Prefix]netip.Addr{
		pfx("10.244.1.0/26"):    addr("198.51.100.12"),
		pfx("10.244.0.70/32"):   addr("198.51.100.13"), // borrowed out of our block by another node
		pfx("10.244.0.71/32"):   addr("2001:db8::1"),   // unresolvable
		pfx("10.244.200.5/32"):  addr("203.0.113.7"),   // tunnel
		pfx("172.16.0.5/32"):    addr("198.51.100.13"), // in no pool: ignored
		pfx("10.244.0.64/26"):   addr("198.51.100.12"), // holds the addresses below .128
		pfx("10.244.200.64/26"): addr("198.51.100.12"),
	}
	return in
}

// shadowedIn tells whether Compute puts something other than nothing at ip's /32 when no pod
// has it: the cases WorkloadChanges must hand back to Compute.
func shadowedIn(in Input, ip netip.Addr) bool {
	dst := netip.PrefixFrom(ip, 32)
	if _, ok := in.BGPRoutes[dst]; ok {
		return true
	}
	return slices.Contains(in.LocalBlocks, dst)
}

// Applying WorkloadChanges to the previous result must give what a fresh Compute gives, at
// every step of random pod churn: adds, deletes, moves to another veth, two pods claiming one
// address, invalid entries, and addresses that collide with blocks and BGP /32s.
func TestWorkloadChangesEqualsCompute(t *testing.T) {
	addrs := []netip.Addr{addr("10.244.0.60"), addr("10.244.0.70"), addr("10.244.0.71"), addr("172.16.0.5"), addr("10.244.200.5")}
	for i := 1; i <= 12; i++ {
		addrs = append(addrs, netip.AddrFrom4([4]byte{10, 244, 0, byte(i)}))
	}
	addrs = append(addrs, addr("10.244.0.100"), addr("10.244.200.77"))
	ifaces := []string{"cali0", "cali1", "cali2", "cali3"}
	for seed := uint64(1); seed <= 20; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 42))
			in := equivalenceInput()
			var ws []Workload
			old, _ := IndexWorkloads(ws, nil)
			in.Workloads = ws
			ref := Compute(in)
			state := maps.Clone(ref.Routes)
			spare := WorkloadIndex{}
			incremental, fallbacks := 0, 0
			for step := 0; step < 300; step++ {
				switch op := rng.IntN(10); {
				case op < 4 || len(ws) == 0: // add, possibly on an address a pod already has
					ws = append(ws, Workload{IP: addrs[rng.IntN(len(addrs))], Interface: ifaces[rng.IntN(len(ifaces))]})
				case op < 7: // delete
					i := rng.IntN(len(ws))
					ws = slices.Delete(slices.Clone(ws), i, i+1)
				case op < 9: // move to another veth
					ws = slices.Clone(ws)
					ws[rng.IntN(len(ws))].Interface = ifaces[rng.IntN(len(ifaces))]
				default: // an invalid entry
					ws = append(ws, Workload{IP: addrs[rng.IntN(len(addrs))]})
				}
				cur, _ := IndexWorkloads(ws, spare)
				changes, ok := WorkloadChanges(in, old, cur)

				in.Workloads = ws
				fresh := Compute(in)
				wantOK := true
				for ip := range cur {
					if _, had := old[ip]; !had && shadowedIn(in, ip) {
						wantOK = false
					}
				}
				for ip := range old {
					if _, has := cur[ip]; !has && shadowedIn(in, ip) {
						wantOK = false
					}
				}
				if ok != wantOK {
					t.Fatalf("step %d: ok = %v, want %v (old %v cur %v)", step, ok, wantOK, old, cur)
				}
				if ok {
					incremental++
					for _, c := range changes {
						if c.Remove {
							delete(state, c.Dst)
						} else {
							state[c.Dst] = c.Route
						}
					}
					if !maps.Equal(state, fresh.Routes) {
						t.Fatalf("step %d: incremental routes differ from Compute\nchanges %v\ngot  %v\nwant %v", step, changes, state, fresh.Routes)
					}
					// What the caller keeps from its last full Compute stays true.
					if !slices.Equal(ref.Unresolved, fresh.Unresolved) || !slices.Equal(ref.Ignored, fresh.Ignored) || ref.TunnelNeeded != fresh.TunnelNeeded {
						t.Fatalf("step %d: unresolved/ignored changed on a workload-only change: %v %v -> %v %v", step, ref.Unresolved, ref.Ignored, fresh.Unresolved, fresh.Ignored)
					}
				} else {
					fallbacks++
					ref, state = fresh, maps.Clone(fresh.Routes)
				}
				old, spare = cur, old
			}
			if incremental < 100 || fallbacks == 0 {
				t.Fatalf("incremental %d, fallbacks %d: the sequence did not exercise both paths", incremental, fallbacks)
			}
		})
	}
}

func TestWorkloadChangesNoChange(t *testing.T) {
	in := equivalenceInput()
	idx, _ := IndexWorkloads([]Workload{{IP: addr("10.244.0.5"), Interface: "cali0"}}, nil)
	changes, ok := WorkloadChanges(in, idx, maps.Clone(idx))
	if !ok || len(changes) != 0 {
		t.Fatalf("changes %v ok %v for equal indexes", changes, ok)
	}
}
