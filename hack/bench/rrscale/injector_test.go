package main

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/tabbynet/tabby/internal/bgpwire"
)

// An UPDATE the injector sends is one it reads back: the same prefixes, next hop and family.
func TestUpdateRoundTrip(t *testing.T) {
	clients := []netip.Addr{clientAddr(0), clientAddr(1)}
	blocks := []netip.Prefix{blockAt(0), blockAt(1), blockAt(2)}
	in := newInjector(clients, []netip.Addr{netip.MustParseAddr("2001:db8:100::11")}, blocks, []int{0, 1, 0}, asn)
	s := newSession(in, in.clients[1], 0, nil)
	msg := updateMsg(clients[0], []netip.Prefix{blocks[0], blocks[2]}, nil)
	typ, body, err := bgpwire.ReadMessage(bytes.NewReader(msg))
	if err != nil || typ != bgpwire.MsgUpdate {
		t.Fatalf("ReadMessage: type %d, %v", typ, err)
	}
	s.update(body, 42)
	if s.first[0].Load() != 42 || s.first[2].Load() != 42 || s.first[1].Load() != 0 {
		t.Fatalf("arrivals %d %d %d, want 42 0 42", s.first[0].Load(), s.first[1].Load(), s.first[2].Load())
	}
	if in.received.Load() != 1 || in.badNextHop.Load() != 0 {
		t.Fatalf("received %d (want 1: block 2 is a sample's), bad next hops %d", in.received.Load(), in.badNextHop.Load())
	}
	_, body, _ = bgpwire.ReadMessage(bytes.NewReader(updateMsg(netip.Addr{}, nil, []netip.Prefix{blocks[0]})))
	s.update(body, 43)
	if s.first[0].Load() != 0 || in.received.Load() != 0 || s.gone[0].Load() != 43 {
		t.Fatalf("after the withdrawal: arrival %d, received %d, withdrawn at %d (want 43)", s.first[0].Load(), in.received.Load(), s.gone[0].Load())
	}
	if got := blockAt(1).String(); got != "fd00:10:244:1::40/122" {
		t.Fatalf("blockAt(1) = %s", got)
	}
	if got := clientAddr(999).String(); got != "2001:db8:100::1:3e8" {
		t.Fatalf("clientAddr(999) = %s", got)
	}
}

// The reasons sessions ended are told since a point, most frequent first.
func TestEndsSince(t *testing.T) {
	in := newInjector(nil, nil, nil, nil, asn)
	in.ended("read: EOF")
	before := in.endsSoFar()
	for range 10 {
		in.ended("NOTIFICATION 4/0 from the reflector")
	}
	in.ended("read: EOF")
	in.ended("read: EOF")
	if got, want := describeEnds(in.endsSince(before)), "10× NOTIFICATION 4/0 from the reflector, 2× read: EOF"; got != want {
		t.Fatalf("ends since = %q, want %q", got, want)
	}
	if got := describeEnds(in.endsSince(in.endsSoFar())); got != "" {
		t.Fatalf("nothing since now: %q", got)
	}
}
