package policy

import (
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tabbynet/tabby/internal/ipfamily"
)

// With flow logs on, the chains decide every packet of the grid as before, and the rules a
// packet is logged by name, in order, what Verdict says decided each side it crosses: the
// source's egress, then the destination's ingress, stopping at a deny.
func TestFlowLogRulesNameTheVerdict(t *testing.T) {
	rng := rand.New(rand.NewPCG(20261128, 40))
	logged := map[string]int{}
	for i := range 150 {
		g := &generator{rng: rng}
		in := g.input()
		if i%2 == 0 {
			g.admin(&in)
		}
		c := NewCalculator(in)
		c.SetFlowLogs(true)
		for _, fam := range ipfamily.All {
			r := c.Render(fam)
			k := newKernel(t, r, fam)
			checkGrid(t, i, g, in, c, k, fam, map[string]int{})
			if t.Failed() {
				t.Fatalf("cluster %d %v: %s", i, fam, g.describe(in))
			}
			local := map[netip.Addr]string{}
			for _, ep := range in.Endpoints {
				if p := in.Pods[ep.Pod]; p != nil && !p.HostNetwork {
					for _, ip := range p.IPs {
						local[ip] = ep.Interface
					}
				}
			}
			for _, src := range g.addrs {
				for _, dst := range g.addrs {
					if src == dst || ipfamily.OfAddr(src) != fam || ipfamily.OfAddr(dst) != fam {
						continue
					}
					inIf, srcLocal := local[src]
					outIf, dstLocal := local[dst]
					if !srcLocal && !dstLocal {
						continue
					}
					if !srcLocal {
						inIf = "eth0"
					}
					if !dstLocal {
						outIf = "eth0"
					}
					for _, port := range []uint16{80, 443, 5432} {
						k.logged = nil
						got := k.forward(testPacket{in: inIf, out: outIf, src: src, dst: dst, proto: "tcp", port: port})
						d := c.Verdict(Packet{Src: src, Dst: dst, Protocol: "TCP", Port: port})
						var want []string
						for _, side := range []struct {
							local bool
							s     Side
							dir   string
						}{{srcLocal, d.Egress, "egress"}, {dstLocal, d.Ingress, "ingress"}} {
							if !side.local {
								continue
							}
							if dr := side.s.DecidingRule(side.dir); dr.Kind != "" {
								want = append(want, dr.String())
							}
							if !side.s.Allowed {
								break
							}
						}
						var texts []string
						for _, p := range k.logged {
							fr, ok := r.FlowRules[p]
							if !ok {
								t.Fatalf("cluster %d %v: prefix %s logged, not in FlowRules", i, fam, p)
							}
							texts = append(texts, fr.Text)
							logged[fr.Verdict+" "+strings.Fields(fr.Text)[0]]++
						}
						if !slices.Equal(texts, want) {
							t.Fatalf("cluster %d %v: %s -> %s %d: %s, logged %q, Verdict names %q (%s)\n%s", i, fam, src, dst, port, got, texts, want, d.Reason, g.describe(in))
						}
					}
				}
			}
		}
	}
	t.Logf("logged: %v", logged)
	for _, want := range []string{"allow NetworkPolicy", "deny NetworkPolicy", "deny AdminNetworkPolicy", "allow AdminNetworkPolicy", "deny BaselineAdminNetworkPolicy"} {
		if logged[want] < 10 {
			t.Errorf("only %d %q logged: the generator does not exercise enough", logged[want], want)
		}
	}
}

// Off, nothing is logged and the chains are exactly as without flow logs; the incremental
// State renders what the Calculator renders, turned on and off again.
func TestFlowLogsStateMatchesCalculator(t *testing.T) {
	rng := rand.New(rand.NewPCG(20261128, 41))
	for i := range 60 {
		g := &generator{rng: rng}
		in := g.input()
		g.admin(&in)
		s := NewStateOf(in, ipfamily.All...)
		s.Flush()
		for _, on := range []bool{true, false, true} {
			s.SetFlowLogs(on)
			s.Flush()
			c := NewCalculator(in)
			c.SetFlowLogs(on)
			for _, fam := range ipfamily.All {
				want := c.Render(fam)
				got := s.Rendered(fam)
				if !reflect.DeepEqual(got.Chains, want.Chains) {
					t.Fatalf("cluster %d %v flow logs %v: State's chains differ from the Calculator's", i, fam, on)
				}
				rules, _ := s.FlowRules()
				for p, fr := range want.FlowRules {
					if !strings.Contains(strings.Join(flatten(got.Chains), "\n"), p) {
						continue
					}
					if rules[p] != fr {
						t.Fatalf("cluster %d %v: State's rule for %s is %+v, want %+v", i, fam, p, rules[p], fr)
					}
				}
				for _, rule := range flatten(got.Chains) {
					if strings.Contains(rule, "NFLOG") != on && strings.Contains(rule, "NFLOG") {
						t.Fatalf("cluster %d %v: NFLOG rule with flow logs off: %s", i, fam, rule)
					}
				}
			}
			if rules, _ := s.FlowRules(); !on && len(rules) != 0 {
				t.Fatalf("cluster %d: %d flow rules kept with flow logs off", i, len(rules))
			}
		}
	}
}

func flatten(chains map[string][]string) []string {
	var out []string
	for _, rules := range chains {
		out = append(out, rules...)
	}
	return out
}
