package policy

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/tabbynet/tabby/internal/ipfamily"
)

// Set kinds, the letter after "tabby-" in a set name.
const (
	setKindPods      = 'p' // hash:ip: the pods one peer selects
	setKindCIDR      = 'c' // hash:net: one ipBlock, its excepts as nomatch entries
	setKindNamedPort = 'n' // hash:ip,port: every pod's (address, protocol:port) for one port name
)

// hashLen base32 characters (100 bits) keep "tabby-p4-" + hash at 29 characters, within
// ipset's 31.
const hashLen = 20

var lowerBase32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// SetName is the ipset for selection id of a kind in family fam: "tabby-<kind><4|6>-<hash>".
// ipset names are global across families, hence the family in the name; the hash of the
// selection (not of a policy) makes identical selections of different policies one set and
// keeps a name stable across restarts and upgrades.
func setName(kind byte, fam ipfamily.Family, id string) string {
	sum := sha256.Sum256([]byte(id))
	return fmt.Sprintf("%s%c%d-%s", NamePrefix, kind, uint8(fam), lowerBase32.EncodeToString(sum[:])[:hashLen])
}

// podSet is the hash:ip set of the pods s selects, in this family.
func (r *renderer) podSet(s podSelection) string {
	name := setName(setKindPods, r.fam, s.id)
	if _, ok := r.out.IPSets[name]; ok {
		return name
	}
	var members []string
	for _, pod := range r.c.pods {
		if !r.c.selectsPod(s, pod) {
			continue
		}
		for _, ip := range r.c.podIPs(pod, r.fam) {
			members = append(members, ip.String())
		}
	}
	r.addSet(name, "hash:ip", members)
	return name
}

// blockSet is the hash:net set of b, or false when b is of the other family or matches no
// address at all.
func (r *renderer) blockSet(b ipBlock) (string, bool) {
	if ipfamily.OfPrefix(b.cidr) != r.fam {
		return "", false
	}
	members := blockMembers(b)
	if len(members) == 0 {
		return "", false
	}
	name := setName(setKindCIDR, r.fam, b.id)
	r.addSet(name, "hash:net", members)
	return name, true
}

// blockMembers renders b for hash:net, where the most specific entry containing an address
// decides and a nomatch entry says "not in the set". hash:net cannot hold a /0, so a /0 is
// its two halves; a half (or the cidr) that an except covers whole is left out, and an except
// is kept only strictly inside a kept entry, so no entry is ever both a match and a nomatch.
func blockMembers(b ipBlock) []string {
	pieces := []netip.Prefix{b.cidr}
	if b.cidr.Bits() == 0 {
		upper := b.cidr.Addr().AsSlice()
		upper[0] |= 0x80
		hi, _ := netip.AddrFromSlice(upper)
		pieces = []netip.Prefix{netip.PrefixFrom(b.cidr.Addr(), 1), netip.PrefixFrom(hi, 1)}
	}
	var members []string
	for _, piece := range pieces {
		covered := slices.ContainsFunc(b.except, func(e netip.Prefix) bool {
			return e.Bits() <= piece.Bits() && e.Contains(piece.Addr())
		})
		if covered {
			continue
		}
		members = append(members, netMember(piece))
		for _, e := range b.except {
			if e.Bits() > piece.Bits() && piece.Contains(e.Addr()) {
				members = append(members, netMember(e)+" nomatch")
			}
		}
	}
	return members
}

// netMember is p as ipset prints a hash:net entry: a host prefix as a bare address.
func netMember(p netip.Prefix) string {
	if p.Bits() == p.Addr().BitLen() {
		return p.Addr().String()
	}
	return p.String()
}

// namedPortSet is the hash:ip,port set of every pod-network pod's address with its port
// named name for proto. It is shared by every egress rule using that name; the rule
// intersects it with its peers' sets.
func (r *renderer) namedPortSet(name string, proto Protocol) string {
	setID := strconv.Quote(name) + "/" + string(proto)
	set := setName(setKindNamedPort, r.fam, setID)
	if _, ok := r.out.IPSets[set]; ok {
		return set
	}
	p, _ := iptablesProtocol(proto)
	var members []string
	for _, pod := range r.c.pods {
		if pod.HostNetwork {
			continue
		}
		ports := resolveNamedPort(pod, name, proto)
		for _, ip := range r.c.podIPs(pod, r.fam) {
			for _, port := range ports {
				members = append(members, ip.String()+","+p+":"+strconv.Itoa(int(port)))
			}
		}
	}
	r.addSet(set, "hash:ip,port", members)
	return set
}

func (r *renderer) addSet(name, typ string, members []string) {
	slices.Sort(members)
	members = slices.Compact(members)
	if members == nil {
		members = []string{}
	}
	r.out.IPSets[name] = IPSet{Type: typ, Family: r.fam, Members: members}
}

// IsSetName tells whether name is a policy ipset (of either family), so a writer can find
// stale ones without knowing how they are built.
func IsSetName(name string) bool {
	if !strings.HasPrefix(name, NamePrefix) || len(name) != len(NamePrefix)+3+hashLen {
		return false
	}
	rest := name[len(NamePrefix):]
	switch rest[0] {
	case setKindPods, setKindCIDR, setKindNamedPort:
	default:
		return false
	}
	return (rest[1] == '4' || rest[1] == '6') && rest[2] == '-'
}
