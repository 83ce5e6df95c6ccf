package flow

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestFilterMatch(t *testing.T) {
	r := Record{
		Node: "node-1", Verdict: Deny,
		Src: Endpoint{Namespace: "demo", Pod: "client", IP: netip.MustParseAddr("10.244.1.5")},
		Dst: Endpoint{IP: netip.MustParseAddr("203.0.113.9")},
	}
	for _, tc := range []struct {
		f    Filter
		want bool
	}{
		{Filter{}, true},
		{Filter{Verdict: Deny}, true},
		{Filter{Verdict: Allow}, false},
		{Filter{From: "demo/client"}, true},
		{Filter{From: "demo/"}, true},
		{Filter{From: "demo/server"}, false},
		{Filter{From: "other/"}, false},
		{Filter{From: "10.244.1.5"}, true},
		{Filter{To: "203.0.113.9"}, true},
		{Filter{To: "demo/"}, false},
		{Filter{To: "not-an-address"}, false},
		{Filter{Node: "node-2"}, false},
	} {
		if got := tc.f.Match(r); got != tc.want {
			t.Errorf("%+v: got %v, want %v", tc.f, got, tc.want)
		}
	}
}

func TestFilterCheck(t *testing.T) {
	for _, ok := range []Filter{{}, {From: "demo/client", To: "demo/"}, {From: "10.244.1.5", To: "2001:db8::1"}, {Verdict: Deny}} {
		if err := ok.Check(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
	for _, tc := range []struct {
		f    Filter
		want string
	}{
		{Filter{From: "client"}, `from: Invalid value: "client"`},
		{Filter{To: "/pod"}, `to: Invalid value: "/pod"`},
		{Filter{To: "a/b/c"}, `to: Invalid value: "a/b/c"`},
		{Filter{Verdict: "drop"}, `verdict: Unsupported value: "drop"`},
	} {
		if err := tc.f.Check(); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want %s...", tc.f, err, tc.want)
		}
	}
}

func TestStream(t *testing.T) {
	deny := Record{Verdict: Deny, Node: "n"}
	allow := Record{Verdict: Allow, Node: "n"}
	var got []Record
	send := func(r Record) error { got = append(got, r); return nil }
	if err := Stream(context.Background(), Filter{Verdict: Deny}, []Record{allow, deny}, false, nil, send); err != nil || len(got) != 1 {
		t.Fatalf("kept: %v, %v", got, err)
	}
	got = nil
	live := make(chan Record, 2)
	live <- allow
	live <- deny
	ctx, cancel := context.WithCancel(context.Background())
	stop := errors.New("enough")
	err := Stream(ctx, Filter{Verdict: Deny}, nil, true, live, func(r Record) error {
		got = append(got, r)
		return stop
	})
	cancel()
	if !errors.Is(err, stop) || len(got) != 1 || got[0].Verdict != Deny {
		t.Fatalf("followed: %v, %v", got, err)
	}
	if err := Stream(ctx, Filter{}, nil, true, make(chan Record), send); !errors.Is(err, context.Canceled) {
		t.Fatalf("ended context: %v", err)
	}
}
