package lbipam

import (
	"cmp"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// Allocator is what is taken and where from: the LoadBalancer pools and the addresses Services
// hold. It is not safe for concurrent use (the controller has one worker).
type Allocator struct {
	pools []model.Pool // LoadBalancer pools, sorted by name
	addrs map[netip.Addr]map[string]holder
	held  map[string][]netip.Addr // per Service, in its families' order
}

// holder is one Service holding an address, with what sharing it needs to know.
type holder struct {
	key, sharingKey, backend string
	created                  time.Time
	ports                    []string
}

func holderOf(r Request) holder {
	return holder{key: r.Key, sharingKey: r.SharingKey, backend: r.Backend, created: r.Created, ports: r.Ports}
}

// New returns an empty allocator.
func New() *Allocator {
	return &Allocator{addrs: map[netip.Addr]map[string]holder{}, held: map[string][]netip.Addr{}}
}

// SetPools replaces the pools; those not for LoadBalancer addresses are ignored. Addresses held
// in a pool that is gone stay held.
func (a *Allocator) SetPools(pools []model.Pool) {
	a.pools = a.pools[:0]
	for _, p := range pools {
		if p.LoadBalancer() {
			a.pools = append(a.pools, p)
		}
	}
	slices.SortFunc(a.pools, func(x, y model.Pool) int { return cmp.Compare(x.Name, y.Name) })
}

// Pools are the LoadBalancer pools, sorted by name.
func (a *Allocator) Pools() []model.Pool { return a.pools }

// Held is what the Service holds.
func (a *Allocator) Held(key string) []netip.Addr { return a.held[key] }

// Holders are the Services holding addr, sorted.
func (a *Allocator) Holders(addr netip.Addr) []string {
	var out []string
	for k := range a.addrs[addr] {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Release forgets what the Service holds.
func (a *Allocator) Release(key string) {
	for _, addr := range a.held[key] {
		delete(a.addrs[addr], key)
		if len(a.addrs[addr]) == 0 {
			delete(a.addrs, addr)
		}
	}
	delete(a.held, key)
}

// Conflict is an address two Services hold that they may not share: the one created later
// (Loser) gives it up.
type Conflict struct {
	Addr          netip.Addr
	Loser, Winner string
	Why           string
}

// Claim records that the Service holds addrs (what its status says), replacing what it held.
// An address another Service holds, and may not share with it, goes to the older of them: when
// that is the other, the address is not recorded for r; when it is r, the others lose it. Each
// such address is a Conflict; the losers must be given other addresses or none.
func (a *Allocator) Claim(r Request, addrs []netip.Addr) []Conflict {
	a.Release(r.Key)
	me := holderOf(r)
	var conflicts []Conflict
	var kept []netip.Addr
	for _, addr := range addrs {
		if slices.Contains(kept, addr) {
			continue
		}
		var older *holder
		var why string
		var newer []holder
		for _, h := range a.addrs[addr] {
			if w := incompatible(h, me); w != "" {
				if h.created.Before(me.created) || h.created.Equal(me.created) && h.key < me.key {
					if older == nil || h.created.Before(older.created) {
						older, why = &h, w
					}
				} else {
					newer = append(newer, h)
				}
			}
		}
		if older != nil {
			conflicts = append(conflicts, Conflict{Addr: addr, Loser: r.Key, Winner: older.key, Why: why})
			continue
		}
		for _, h := range newer {
			conflicts = append(conflicts, Conflict{Addr: addr, Loser: h.key, Winner: r.Key, Why: incompatible(me, h)})
			a.drop(h.key, addr)
		}
		kept = append(kept, addr)
	}
	a.record(me, kept)
	return conflicts
}

func (a *Allocator) record(h holder, addrs []netip.Addr) {
	if len(addrs) == 0 {
		return
	}
	a.held[h.key] = slices.Clone(addrs)
	for _, addr := range addrs {
		if a.addrs[addr] == nil {
			a.addrs[addr] = map[string]holder{}
		}
		a.addrs[addr][h.key] = h
	}
}

// drop takes one address away from a Service.
func (a *Allocator) drop(key string, addr netip.Addr) {
	delete(a.addrs[addr], key)
	if len(a.addrs[addr]) == 0 {
		delete(a.addrs, addr)
	}
	a.held[key] = slices.DeleteFunc(a.held[key], func(x netip.Addr) bool { return x == addr })
	if len(a.held[key]) == 0 {
		delete(a.held, key)
	}
}

// incompatible says why h and r may not share an address, or "" when they may.
func incompatible(h, r holder) string {
	switch {
	case h.sharingKey == "" && r.sharingKey == "":
		return fmt.Sprintf("it is held by %s, and neither has a sharing key (%s)", h.key, v1.AnnotationAllowSharedIP)
	case h.sharingKey == "":
		return fmt.Sprintf("it is held by %s, which has no sharing key", h.key)
	case h.sharingKey != r.sharingKey:
		return fmt.Sprintf("it is held by %s under another sharing key (%q, not %q)", h.key, h.sharingKey, r.sharingKey)
	case h.backend != r.backend:
		return fmt.Sprintf("it is held by %s, and two Services share an address only when both use externalTrafficPolicy Cluster or both Local with the same selector", h.key)
	}
	for _, p := range r.ports {
		if slices.Contains(h.ports, p) {
			return fmt.Sprintf("it is held by %s, which uses port %s too", h.key, p)
		}
	}
	return ""
}

// shareWith says why r may not take addr (held by others), or "" when it may.
func (a *Allocator) shareWith(addr netip.Addr, r Request) string {
	me := holderOf(r)
	for _, k := range a.Holders(addr) {
		if k == r.Key {
			continue
		}
		if w := incompatible(a.addrs[addr][k], me); w != "" {
			return w
		}
	}
	return ""
}

// Refusal is why a Service gets no address: every pool tried and why it could not serve.
type Refusal struct{ Reasons []string }

func (e *Refusal) Error() string { return strings.Join(e.Reasons, "; ") }

// Decision is what a Service gets.
type Decision struct {
	// Addresses, in the Service's families' order.
	Addresses []netip.Addr
	// Missing says why a family a PreferDualStack Service wants has no address.
	Missing []string
}

// Allocate decides r's addresses without recording them (Claim does, once they are written).
// What r holds and may keep, it keeps.
func (a *Allocator) Allocate(r Request) (Decision, error) {
	for _, addr := range r.Addresses {
		if !slices.Contains(r.Families, ipfamily.OfAddr(addr)) {
			return Decision{}, &Refusal{[]string{fmt.Sprintf("requested address %s is %s, and the Service's ipFamilies are %v", addr, ipfamily.OfAddr(addr), r.Families)}}
		}
	}
	var d Decision
	var why []string
	for _, fam := range r.Families {
		addr, w := a.allocateFamily(r, fam)
		if w != "" {
			why = append(why, w)
			continue
		}
		d.Addresses = append(d.Addresses, addr)
	}
	if len(why) > 0 && (r.RequireAll || len(d.Addresses) == 0) {
		return Decision{}, &Refusal{why}
	}
	d.Missing = why
	return d, nil
}

// allocateFamily finds r's address of one family, or says why there is none.
func (a *Allocator) allocateFamily(r Request, fam ipfamily.Family) (netip.Addr, string) {
	named := r.Pools.Get(fam)
	if i := slices.IndexFunc(a.held[r.Key], func(x netip.Addr) bool { return ipfamily.OfAddr(x) == fam }); i >= 0 {
		cur := a.held[r.Key][i]
		if a.mayKeep(r, cur, named) {
			return cur, ""
		}
	}
	if i := slices.IndexFunc(r.Addresses, func(x netip.Addr) bool { return ipfamily.OfAddr(x) == fam }); i >= 0 {
		return a.requested(r, r.Addresses[i], named)
	}
	if len(r.Addresses) > 0 {
		return netip.Addr{}, fmt.Sprintf("no %s address requested (the Service asks for %v)", fam, r.Addresses)
	}
	pools, why := a.candidates(fam, named)
	// A sharing key first looks for an address it may share, as MetalLB does: Services meant
	// to be reached at one address get one.
	if r.SharingKey != "" {
		for _, p := range pools {
			for _, addr := range a.sortedTaken(p.CIDR) {
				if !slices.Contains(a.held[r.Key], addr) && a.shareWith(addr, r) == "" {
					return addr, ""
				}
			}
		}
	}
	for _, p := range pools {
		if addr, ok := a.free(p.CIDR); ok {
			return addr, ""
		}
		why = append(why, fmt.Sprintf("%s (%s) is full", p.Name, p.CIDR))
	}
	if len(why) == 0 {
		return netip.Addr{}, fmt.Sprintf("no %s LoadBalancer pool", fam)
	}
	return netip.Addr{}, fmt.Sprintf("no free %s address: %s", fam, strings.Join(why, ", "))
}

// mayKeep tells whether r may keep an address it holds: what it asks for still allows it, and
// the other holders still share it. A held address in no pool (the pool was deleted) is kept:
// taking it away would cut the Service's traffic.
func (a *Allocator) mayKeep(r Request, addr netip.Addr, named []string) bool {
	if slices.ContainsFunc(r.Addresses, func(x netip.Addr) bool { return ipfamily.OfAddr(x) == ipfamily.OfAddr(addr) }) && !slices.Contains(r.Addresses, addr) {
		return false
	}
	if p, ok := a.poolOf(addr); ok && len(named) > 0 && !names(p, named) {
		return false
	}
	return a.shareWith(addr, r) == ""
}

// requested checks an address the Service asks for.
func (a *Allocator) requested(r Request, addr netip.Addr, named []string) (netip.Addr, string) {
	p, ok := a.poolOf(addr)
	switch {
	case !ok:
		return netip.Addr{}, fmt.Sprintf("requested address %s is in no LoadBalancer pool", addr)
	case len(named) > 0 && !names(p, named):
		return netip.Addr{}, fmt.Sprintf("requested address %s is in pool %s, which the Service's pools %v do not name", addr, p.Name, named)
	case p.Disabled:
		return netip.Addr{}, fmt.Sprintf("requested address %s is in pool %s, which is disabled", addr, p.Name)
	}
	if w := a.shareWith(addr, r); w != "" {
		return netip.Addr{}, fmt.Sprintf("requested address %s is not free: %s", addr, w)
	}
	return addr, ""
}

// candidates are the pools r's automatic address of fam may come from, and why the others may
// not: the named ones (a Manual pool too), else every Automatic one; never a disabled one.
func (a *Allocator) candidates(fam ipfamily.Family, named []string) ([]model.Pool, []string) {
	var out []model.Pool
	var why []string
	if len(named) > 0 {
		for _, n := range named {
			i := slices.IndexFunc(a.pools, func(p model.Pool) bool { return names(p, []string{n}) })
			switch {
			case i < 0:
				why = append(why, fmt.Sprintf("%s is no LoadBalancer pool", n))
			case a.pools[i].Family() != fam:
				why = append(why, fmt.Sprintf("%s is an %s pool", n, a.pools[i].Family()))
			case a.pools[i].Disabled:
				why = append(why, fmt.Sprintf("%s is disabled", a.pools[i].Name))
			default:
				out = append(out, a.pools[i])
			}
		}
		return out, why
	}
	for _, p := range a.pools {
		switch {
		case p.Family() != fam:
		case p.Disabled:
			why = append(why, fmt.Sprintf("%s is disabled", p.Name))
		case p.AssignmentMode == v1.AssignmentModeManual:
			why = append(why, fmt.Sprintf("%s is Manual (only for Services that name it or one of its addresses)", p.Name))
		default:
			out = append(out, p)
		}
	}
	return out, why
}

// names tells whether the list names the pool, by name or CIDR.
func names(p model.Pool, named []string) bool {
	return slices.ContainsFunc(named, func(n string) bool { return n == p.Name || n == p.CIDR.String() })
}

// PoolOf is the LoadBalancer pool holding addr.
func (a *Allocator) poolOf(addr netip.Addr) (model.Pool, bool) {
	for _, p := range a.pools {
		if p.CIDR.Contains(addr) {
			return p, true
		}
	}
	return model.Pool{}, false
}

// Orphans are the addresses the Service holds that lie in no LoadBalancer pool: their pool was
// deleted. They stay the Service's and nobody else's.
func (a *Allocator) Orphans(key string) []netip.Addr {
	var out []netip.Addr
	for _, addr := range a.held[key] {
		if _, ok := a.poolOf(addr); !ok {
			out = append(out, addr)
		}
	}
	return out
}

// sortedTaken are the taken addresses in the prefix, lowest first.
func (a *Allocator) sortedTaken(p netip.Prefix) []netip.Addr {
	var out []netip.Addr
	for addr := range a.addrs {
		if p.Contains(addr) {
			out = append(out, addr)
		}
	}
	slices.SortFunc(out, func(x, y netip.Addr) int { return x.Compare(y) })
	return out
}

// free is the lowest address of the prefix nobody holds. Every address of a pool is handed out,
// its first and last too (a LoadBalancer address is a /32 or /128 route, not a subnet's).
func (a *Allocator) free(p netip.Prefix) (netip.Addr, bool) {
	for addr := p.Masked().Addr(); p.Contains(addr); addr = addr.Next() {
		if _, taken := a.addrs[addr]; !taken {
			return addr, true
		}
	}
	return netip.Addr{}, false
}

// Usage is one pool's count of addresses in use and free.
type Usage struct {
	Pool       string
	InUse      int
	Free       float64 // an IPv6 pool may hold more than an int counts
	Disabled   bool
	Assignment v1.AssignmentMode
}

// Usage counts every pool's addresses.
func (a *Allocator) Usage() []Usage {
	out := make([]Usage, 0, len(a.pools))
	for _, p := range a.pools {
		n := len(a.sortedTaken(p.CIDR))
		size := math.Ldexp(1, p.CIDR.Addr().BitLen()-p.CIDR.Bits())
		out = append(out, Usage{Pool: p.Name, InUse: n, Free: size - float64(n), Disabled: p.Disabled, Assignment: p.AssignmentMode})
	}
	return out
}

// Orphaned are every held address that lies in no LoadBalancer pool.
func (a *Allocator) Orphaned() []netip.Addr {
	var out []netip.Addr
	for addr := range a.addrs {
		if _, ok := a.poolOf(addr); !ok {
			out = append(out, addr)
		}
	}
	return out
}
