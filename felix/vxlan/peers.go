package vxlan

import (
	"net/netip"
	"slices"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/internal/dirtyset"
)

// peerIndex holds the other nodes' VTEPs of one family and decides, node by node, which are
// programmed (calc.PeerConflict): a node's VTEP changing re-decides it and the nodes sharing
// its old or new address or MAC, whatever the number of nodes.
type peerIndex struct {
	vteps  map[string]calc.VTEP // every other node's complete VTEP
	byAddr map[netip.Addr][]string
	byMAC  map[model.MAC][]string

	active   map[string]calc.VTEP // the programmed ones
	conflict map[string]string
	dirty    dirtyset.Set[string]
}

func newPeerIndex() *peerIndex {
	return &peerIndex{
		vteps: map[string]calc.VTEP{}, byAddr: map[netip.Addr][]string{}, byMAC: map[model.MAC][]string{},
		active: map[string]calc.VTEP{}, conflict: map[string]string{},
	}
}

// set records node's VTEP (ok false: it has none).
func (p *peerIndex) set(node string, v calc.VTEP, ok bool) {
	old, had := p.vteps[node]
	if had == ok && (!ok || old == v) {
		return
	}
	if had {
		p.byAddr[old.Addr] = p.unhold(p.byAddr[old.Addr], node)
		p.byMAC[old.MAC] = p.unhold(p.byMAC[old.MAC], node)
		if len(p.byAddr[old.Addr]) == 0 {
			delete(p.byAddr, old.Addr)
		}
		if len(p.byMAC[old.MAC]) == 0 {
			delete(p.byMAC, old.MAC)
		}
		delete(p.vteps, node)
	}
	if ok {
		p.vteps[node] = v
		p.byAddr[v.Addr] = p.hold(p.byAddr[v.Addr], node)
		p.byMAC[v.MAC] = p.hold(p.byMAC[v.MAC], node)
	}
	p.dirty.Add(node)
}

// hold adds node to holders, marking the others: which of them comes first may change.
func (p *peerIndex) hold(holders []string, node string) []string {
	for _, h := range holders {
		p.dirty.Add(h)
	}
	i, _ := slices.BinarySearch(holders, node)
	return slices.Insert(holders, i, node)
}

func (p *peerIndex) unhold(holders []string, node string) []string {
	i, found := slices.BinarySearch(holders, node)
	if !found {
		return holders
	}
	holders = slices.Delete(holders, i, i+1)
	for _, h := range holders {
		p.dirty.Add(h)
	}
	return holders
}

// all marks every node: this node's own VTEP changed.
func (p *peerIndex) all() {
	for n := range p.vteps {
		p.dirty.Add(n)
	}
	for n := range p.active {
		p.dirty.Add(n)
	}
}

// peerChange is a node whose programmed VTEP, or the reason it has none, changed.
type peerChange struct {
	node             string
	old, new         calc.VTEP
	wasActive, isNow bool
}

// evaluate decides the marked nodes against this node's VTEP (local, when ok) and returns those
// that changed.
func (p *peerIndex) evaluate(local calc.VTEP, ok bool) []peerChange {
	var out []peerChange
	for _, node := range p.dirty.Keys() {
		v, has := p.vteps[node]
		why := ""
		if has {
			why = calc.PeerConflict(v, calc.PeerHolders{Addr: p.byAddr[v.Addr], MAC: p.byMAC[v.MAC]}, local, ok)
		}
		isNow := has && why == ""
		old, wasActive := p.active[node]
		if wasActive == isNow && (!isNow || old == v) && p.conflict[node] == why {
			continue
		}
		if isNow {
			p.active[node] = v
		} else {
			delete(p.active, node)
		}
		if why == "" {
			delete(p.conflict, node)
		} else {
			p.conflict[node] = why
		}
		out = append(out, peerChange{node: node, old: old, new: v, wasActive: wasActive, isNow: isNow})
	}
	p.dirty.Clear()
	return out
}

// state is node's programmed VTEP, or why it has none ("" when it has no complete VTEP).
func (p *peerIndex) state(node string) (calc.VTEP, bool, string) {
	v, ok := p.active[node]
	return v, ok, p.conflict[node]
}
