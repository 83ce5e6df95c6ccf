package policy

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/tabbynet/tabby/internal/ipfamily"
)

// This file is a tiny model of the kernel for Rendered: it walks the chains the way netfilter
// does (jump, goto, RETURN, fall off the end) and matches ipsets the way ipset does (hash:net:
// the most specific entry containing the address decides, a nomatch entry means "not in
// the set"). Every rule must parse completely, so a renderer change to a syntax this model
// does not know fails the tests instead of being skipped.

type testPacket struct {
	in, out  string // interfaces; "eth0" for the node's uplink
	src, dst netip.Addr
	proto    string // "tcp", "udp", "sctp", "icmp"
	port     uint16
}

func (p testPacket) String() string {
	return fmt.Sprintf("%s(%s) -> %s(%s) %s/%d", p.src, p.in, p.dst, p.out, p.proto, p.port)
}

type kernelRule struct {
	text    string
	matches []func(testPacket) bool
	target  string
	isGoto  bool
	// prefix of an NFLOG target, which logs and goes on.
	prefix string
}

type kernelSet struct {
	typ     string
	ips     map[netip.Addr]bool
	nets    map[netip.Prefix]bool // value: nomatch
	ipPorts map[string]bool       // "ip,proto:port"
}

type kernel struct {
	t      testing.TB
	names  map[string]bool // every rendered chain, so rules parse in any order
	chains map[string][]kernelRule
	sets   map[string]*kernelSet
	// logged: the NFLOG prefixes the packets run so far matched, in order.
	logged []string
}

// newKernel loads r, checking what the real kernel and tools would refuse: names too long,
// a rule naming a missing chain or set, a set member of the wrong family or syntax.
func newKernel(t testing.TB, r Rendered, fam ipfamily.Family) *kernel {
	t.Helper()
	k := &kernel{t: t, names: map[string]bool{}, chains: map[string][]kernelRule{}, sets: map[string]*kernelSet{}}
	for name := range r.Chains {
		k.names[name] = true
	}
	for name, s := range r.IPSets {
		if len(name) > 31 {
			t.Fatalf("set %s: name longer than 31", name)
		}
		if s.Family != fam {
			t.Fatalf("set %s: family %v in a %v rendering", name, s.Family, fam)
		}
		k.sets[name] = parseSet(t, name, s, fam)
	}
	for name, rules := range r.Chains {
		if len(name) > 28 {
			t.Fatalf("chain %s: name longer than 28", name)
		}
		for _, text := range rules {
			k.chains[name] = append(k.chains[name], k.parseRule(name, text))
		}
	}
	return k
}

func parseSet(t testing.TB, name string, s IPSet, fam ipfamily.Family) *kernelSet {
	t.Helper()
	ks := &kernelSet{typ: s.Type, ips: map[netip.Addr]bool{}, nets: map[netip.Prefix]bool{}, ipPorts: map[string]bool{}}
	for _, m := range s.Members {
		bad := func(why string) { t.Fatalf("set %s (%s): member %q: %s", name, s.Type, m, why) }
		switch s.Type {
		case "hash:ip":
			a, err := netip.ParseAddr(m)
			if err != nil || ipfamily.OfAddr(a) != fam || a.String() != m {
				bad("not a canonical address of the family")
			}
			ks.ips[a] = true
		case "hash:net":
			text, nomatch := strings.CutSuffix(m, " nomatch")
			p, err := netip.ParsePrefix(text)
			if err != nil {
				a, err2 := netip.ParseAddr(text)
				if err2 != nil {
					bad("not a prefix")
				}
				p = netip.PrefixFrom(a, a.BitLen())
			} else if p.Bits() == p.Addr().BitLen() {
				bad("a host prefix ipset prints as a bare address")
			}
			if ipfamily.OfPrefix(p) != fam || p.Masked() != p || p.Bits() == 0 {
				bad("wrong family, host bits set, or /0 (hash:net refuses it)")
			}
			if _, dup := ks.nets[p]; dup {
				bad("the same prefix twice")
			}
			ks.nets[p] = nomatch
		case "hash:ip,port":
			ip, pp, ok := strings.Cut(m, ",")
			proto, port, ok2 := strings.Cut(pp, ":")
			a, err := netip.ParseAddr(ip)
			n, err2 := strconv.Atoi(port)
			if !ok || !ok2 || err != nil || err2 != nil || ipfamily.OfAddr(a) != fam || n < 1 || n > 65535 {
				bad("not ip,proto:port")
			}
			if proto != "tcp" && proto != "udp" && proto != "sctp" {
				bad("protocol")
			}
			ks.ipPorts[m] = true
		default:
			t.Fatalf("set %s: unknown type %q", name, s.Type)
		}
	}
	return ks
}

func ifaceMatch(pattern, iface string) bool {
	if p, ok := strings.CutSuffix(pattern, "+"); ok {
		return strings.HasPrefix(iface, p)
	}
	return pattern == iface
}

func (k *kernel) parseRule(chain, text string) kernelRule {
	t := k.t
	t.Helper()
	f := strings.Fields(text)
	r := kernelRule{text: text}
	bad := func(why string) { t.Fatalf("chain %s: rule %q: %s", chain, text, why) }
	need := func(i, n int) {
		if i+n >= len(f) {
			bad("truncated")
		}
	}
	proto := ""
	for i := 0; i < len(f); i++ {
		switch f[i] {
		case "-i", "-o":
			need(i, 1)
			flag, pat := f[i], f[i+1]
			r.matches = append(r.matches, func(p testPacket) bool {
				if flag == "-i" {
					return ifaceMatch(pat, p.in)
				}
				return ifaceMatch(pat, p.out)
			})
			i++
		case "-p":
			need(i, 1)
			if i != 0 {
				bad("-p not first, as iptables-save prints it")
			}
			proto = f[i+1]
			want := proto
			r.matches = append(r.matches, func(p testPacket) bool { return p.proto == want })
			i++
		case "-m":
			need(i, 1)
			i = k.parseMatch(&r, f, i+1, proto, bad)
		case "-j", "-g":
			need(i, 1)
			if f[i] == "-j" && f[i+1] == "NFLOG" {
				// -j NFLOG --nflog-prefix P --nflog-group N --nflog-threshold T, as iptables-save
				// prints it.
				if i+8 != len(f) || f[i+2] != "--nflog-prefix" || f[i+4] != "--nflog-group" || f[i+5] != strconv.Itoa(FlowLogGroup) ||
					f[i+6] != "--nflog-threshold" || f[i+7] != strconv.Itoa(FlowLogThreshold) {
					bad("NFLOG options not as iptables-save prints them")
				}
				if len(f[i+3]) > 63 {
					bad("NFLOG prefix longer than 63 bytes")
				}
				if strings.Trim(f[i+3], "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
					bad("NFLOG prefix iptables-save would print quoted")
				}
				r.target, r.prefix = "NFLOG", f[i+3]
				i = len(f)
				continue
			}
			if i+2 != len(f) {
				bad("text after the target")
			}
			r.target, r.isGoto = f[i+1], f[i] == "-g"
			switch r.target {
			case "ACCEPT", "DROP", "RETURN":
				if r.isGoto {
					bad("goto to a verdict")
				}
			default:
				if !k.names[r.target] {
					bad("target chain not rendered")
				}
			}
			i++
		default:
			bad("unknown token " + f[i])
		}
	}
	if r.target == "" {
		bad("no target")
	}
	return r
}

// parseMatch parses "-m <module> <options>" starting at the module name; it returns the index
// of the last token consumed.
func (k *kernel) parseMatch(r *kernelRule, f []string, i int, proto string, bad func(string)) int {
	switch mod := f[i]; mod {
	case "conntrack":
		if i+2 >= len(f) || f[i+1] != "--ctstate" {
			bad("conntrack without --ctstate")
		}
		states := strings.Split(f[i+2], ",")
		// Every test packet opens a new connection.
		r.matches = append(r.matches, func(testPacket) bool {
			for _, s := range states {
				if s == "NEW" {
					return true
				}
			}
			return false
		})
		return i + 2
	case "set":
		j := i + 1
		neg := false
		if j < len(f) && f[j] == "!" {
			neg, j = true, j+1
		}
		if j+2 >= len(f) || f[j] != "--match-set" {
			bad("set without --match-set")
		}
		name, flags := f[j+1], f[j+2]
		s, ok := k.sets[name]
		if !ok {
			bad("set " + name + " not rendered")
		}
		switch {
		case s.typ == "hash:ip,port" && flags == "dst,dst":
		case s.typ != "hash:ip,port" && (flags == "src" || flags == "dst"):
		default:
			bad("flags " + flags + " for a " + s.typ)
		}
		r.matches = append(r.matches, func(p testPacket) bool { return s.has(p, flags) != neg })
		return j + 2
	case "tcp", "udp", "sctp":
		if mod != proto {
			bad("-m " + mod + " without -p " + mod)
		}
		if i+2 >= len(f) || f[i+1] != "--dport" {
			bad("protocol match without --dport")
		}
		lo, hi, isRange := strings.Cut(f[i+2], ":")
		a, err := strconv.Atoi(lo)
		b := a
		if isRange {
			var err2 error
			b, err2 = strconv.Atoi(hi)
			if err2 != nil || b <= a {
				bad("bad port range")
			}
		}
		if err != nil || a < 1 || b > 65535 {
			bad("bad port")
		}
		r.matches = append(r.matches, func(p testPacket) bool { return int(p.port) >= a && int(p.port) <= b })
		return i + 2
	}
	bad("unknown match module " + f[i])
	return len(f)
}

func (s *kernelSet) has(p testPacket, flags string) bool {
	ip := p.src
	if flags != "src" {
		ip = p.dst
	}
	switch s.typ {
	case "hash:ip":
		return s.ips[ip]
	case "hash:net":
		for bits := ip.BitLen(); bits >= 1; bits-- {
			pfx, _ := ip.Prefix(bits)
			if nomatch, ok := s.nets[pfx]; ok {
				return !nomatch
			}
		}
		return false
	default:
		return s.ipPorts[fmt.Sprintf("%s,%s:%d", ip, p.proto, p.port)]
	}
}

// forward runs p through tabby-FORWARD: "ACCEPT", "DROP", or "FALLTHROUGH" (left to the
// rest of FORWARD, which tabby does not own).
func (k *kernel) forward(p testPacket) string {
	switch v := k.run(ChainForward, p, 0); v {
	case "ACCEPT", "DROP":
		return v
	}
	return "FALLTHROUGH"
}

func (k *kernel) run(chain string, p testPacket, depth int) string {
	if depth > 10 {
		k.t.Fatalf("chain %s: loop", chain)
	}
	rules := k.chains[chain]
	if !k.names[chain] {
		k.t.Fatalf("chain %s not rendered", chain)
	}
	for _, r := range rules {
		matched := true
		for _, m := range r.matches {
			if !m(p) {
				matched = false
				break
			}
		}
		if !matched {
			continue
		}
		switch r.target {
		case "ACCEPT", "DROP":
			return r.target
		case "RETURN":
			return "RETURN"
		case "NFLOG":
			k.logged = append(k.logged, r.prefix)
			continue
		}
		if v := k.run(r.target, p, depth+1); v == "ACCEPT" || v == "DROP" {
			return v
		}
		if r.isGoto {
			// The called chain returned: with -g, to the caller of this chain.
			return "RETURN"
		}
	}
	return "RETURN"
}

func TestKernelModelHashNet(t *testing.T) {
	r := Rendered{
		Chains: map[string][]string{ChainForward: {"-m set --match-set s dst -j DROP", "-j ACCEPT"}},
		IPSets: map[string]IPSet{"s": {Type: "hash:net", Family: ipfamily.IPv4, Members: []string{
			"10.0.0.0/8", "10.1.0.0/16 nomatch", "10.1.2.0/24", "10.1.2.3 nomatch",
		}}},
	}
	k := newKernel(t, r, ipfamily.IPv4)
	for ip, inSet := range map[string]bool{
		"10.9.9.9": true, "10.1.9.9": false, "10.1.2.9": true, "10.1.2.3": false, "11.0.0.1": false,
	} {
		got := k.forward(testPacket{src: netip.MustParseAddr("192.0.2.1"), dst: netip.MustParseAddr(ip), proto: "tcp", port: 1})
		if want := map[bool]string{true: "DROP", false: "ACCEPT"}[inSet]; got != want {
			t.Errorf("%s: got %s, want %s", ip, got, want)
		}
	}
}
