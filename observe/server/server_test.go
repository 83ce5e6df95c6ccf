package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tabbynet/tabby/apis/flow"
	"github.com/tabbynet/tabby/bird/status"
	"github.com/tabbynet/tabby/observe"
)

// fakeAuth: token "viewer" may get flows and bgpstatuses, "nobody" is a user without the
// right, anything else is not a token the API server knows.
type fakeAuth struct{}

func (fakeAuth) AuthorizeVerbs(_ context.Context, token string, res schema.GroupVersionResource, verbs ...string) error {
	switch token {
	case "viewer":
		if len(verbs) != 1 || verbs[0] != "get" || res.Group != "tabby.dev" {
			return apierrors.NewForbidden(res.GroupResource(), "", errors.New("wrong question"))
		}
		return nil
	case "nobody":
		return apierrors.NewForbidden(res.GroupResource(), "", errors.New(`user "nobody" cannot get `+res.Resource+" cluster-wide"))
	}
	return apierrors.NewUnauthorized("token not accepted by the API server")
}

// fakeFlows keeps kept, then (following) sends what arrives on live; it filters as a real
// source does, and says when a following call returns.
type fakeFlows struct {
	kept     []flow.Record
	live     chan flow.Record
	returned chan error
}

func (f *fakeFlows) Flows(ctx context.Context, filter flow.Filter, follow bool, send func(flow.Record) error) error {
	for _, r := range f.kept {
		if filter.Match(r) {
			if err := send(r); err != nil {
				return err
			}
		}
	}
	if !follow {
		return nil
	}
	err := func() error {
		for {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case r := <-f.live:
				if filter.Match(r) {
					if err := send(r); err != nil {
						return err
					}
				}
			}
		}
	}()
	f.returned <- err
	return err
}

type fakeBGP struct{}

func (fakeBGP) Status(context.Context) (*status.PeersReply, error) {
	return &status.PeersReply{Node: "node-1", ASN: 64512, Peers: []status.PeerStatus{{Address: "198.51.100.12", State: "established"}}}, nil
}

func rec(src, dst string, v flow.Verdict, end time.Time) flow.Record {
	ep := func(s string) flow.Endpoint {
		ns, pod, _ := strings.Cut(s, "/")
		return flow.Endpoint{Namespace: ns, Pod: pod, IP: netip.MustParseAddr("10.244.0.1")}
	}
	return flow.Record{Node: "node-1", Src: ep(src), Dst: ep(dst), Protocol: "TCP", DstPort: 80, Verdict: v, End: end, Start: end.Add(-time.Second),
		Rule: "NetworkPolicy demo/deny-all ingress (no rule matched)", Connections: 1}
}

var t0 = time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)

func newServer(t *testing.T, cfg Config) (*httptest.Server, *fakeFlows) {
	t.Helper()
	src := &fakeFlows{
		kept: []flow.Record{
			rec("demo/a", "demo/b", flow.Allow, t0),
			rec("demo/a", "demo/c", flow.Deny, t0.Add(time.Second)),
			rec("other/x", "demo/c", flow.Deny, t0.Add(2*time.Second)),
		},
		live: make(chan flow.Record), returned: make(chan error, 1),
	}
	if cfg.Flows == nil {
		cfg.Flows = src
	}
	cfg.Node, cfg.Auth = "node-1", fakeAuth{}
	srv := httptest.NewServer(New(cfg))
	t.Cleanup(srv.Close)
	return srv, src
}

func get(t *testing.T, srv *httptest.Server, path, token string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestRefusals(t *testing.T) {
	srv, _ := newServer(t, Config{BGP: fakeBGP{}})
	for _, tc := range []struct {
		path, token string
		code        int
		body        string
	}{
		{observe.FlowsPath, "", http.StatusUnauthorized, "a bearer token is required (one the API server accepts, allowed to get flows.tabby.dev)"},
		{observe.BGPPath, "", http.StatusUnauthorized, "allowed to get bgpstatuses.tabby.dev"},
		{observe.FlowsPath, "stolen", http.StatusUnauthorized, "token not accepted by the API server"},
		{observe.FlowsPath, "nobody", http.StatusForbidden, `user "nobody" cannot get flows cluster-wide`},
		{observe.BGPPath, "nobody", http.StatusForbidden, `user "nobody" cannot get bgpstatuses cluster-wide`},
		{observe.FlowsPath + "?verdict=drop", "viewer", http.StatusBadRequest, `verdict: Unsupported value: "drop": supported values: allow, deny`},
		{observe.FlowsPath + "?from=client", "viewer", http.StatusBadRequest, `from: Invalid value: "client"`},
		{observe.FlowsPath + "?follow=maybe", "viewer", http.StatusBadRequest, `follow: Invalid value: "maybe"`},
	} {
		resp, body := get(t, srv, tc.path, tc.token)
		if resp.StatusCode != tc.code || !strings.Contains(body, tc.body) {
			t.Errorf("GET %s with %q: %d %q, want %d with %q", tc.path, tc.token, resp.StatusCode, body, tc.code, tc.body)
		}
	}
}

func TestOff(t *testing.T) {
	srv, _ := newServer(t, Config{FlowsEnabled: func() bool { return false }})
	resp, body := get(t, srv, observe.FlowsPath, "viewer")
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "FelixConfiguration flowLogs.enabled") || !strings.Contains(body, "node-1") {
		t.Errorf("flow logs off: %d %q", resp.StatusCode, body)
	}
	resp, body = get(t, srv, observe.BGPPath, "viewer")
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "--bgp=none") {
		t.Errorf("no BGP: %d %q", resp.StatusCode, body)
	}
}

func decode(t *testing.T, body string) []flow.Record {
	t.Helper()
	var out []flow.Record
	for _, l := range strings.Split(strings.TrimSpace(body), "\n") {
		if l == "" {
			continue
		}
		var r flow.Record
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		out = append(out, r)
	}
	return out
}

func TestFilter(t *testing.T) {
	srv, _ := newServer(t, Config{})
	for _, tc := range []struct {
		query string
		want  []string // destinations, in order
	}{
		{"", []string{"demo/b", "demo/c", "demo/c"}},
		{"?verdict=deny", []string{"demo/c", "demo/c"}},
		{"?verdict=deny&from=demo/", []string{"demo/c"}},
		{"?to=demo/b", []string{"demo/b"}},
		{"?since=" + url.QueryEscape(t0.Add(time.Second).Format(time.RFC3339Nano)), []string{"demo/c"}},
	} {
		resp, body := get(t, srv, observe.FlowsPath+tc.query, "viewer")
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-ndjson" {
			t.Fatalf("%s: %d %s %q", tc.query, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		var got []string
		for _, r := range decode(t, body) {
			got = append(got, r.Dst.String())
		}
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("%s: got %v, want %v", tc.query, got, tc.want)
		}
	}
}

// A following client gets each new record as it is recorded, and heartbeats while none come;
// when it goes, the source is told.
func TestFollow(t *testing.T) {
	srv, src := newServer(t, Config{Heartbeat: 20 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+observe.FlowsPath+"?follow=1&verdict=deny", nil)
	req.Header.Set("Authorization", "Bearer viewer")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get(observe.HeartbeatHeader) != "20ms" {
		t.Fatalf("%d, heartbeat header %q", resp.StatusCode, resp.Header.Get(observe.HeartbeatHeader))
	}
	lines := bufio.NewScanner(resp.Body)
	next := func() string {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("stream ended: %v", lines.Err())
		}
		return lines.Text()
	}
	for range 2 { // the kept deny records
		if l := next(); l == "" {
			continue
		} else if r := decode(t, l); len(r) != 1 || r[0].Verdict != flow.Deny {
			t.Fatalf("kept record: %q", l)
		}
	}
	// Nothing new: heartbeats only.
	for range 3 {
		if l := next(); l != "" {
			t.Fatalf("want a heartbeat, got %q", l)
		}
	}
	// A new allow is filtered out, a new deny arrives at once (flushed, not buffered).
	go func() {
		src.live <- rec("demo/a", "demo/b", flow.Allow, t0.Add(time.Hour))
		src.live <- rec("demo/z", "demo/c", flow.Deny, t0.Add(time.Hour))
	}()
	for {
		l := next()
		if l == "" {
			continue
		}
		if r := decode(t, l); len(r) != 1 || r[0].Src.String() != "demo/z" {
			t.Fatalf("live record: %q", l)
		}
		break
	}
	resp.Body.Close()
	select {
	case err := <-src.returned:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("source returned %v, want the request's cancellation", err)
		}
	case <-ctx.Done():
		t.Fatal("the source still streams to a client that left")
	}
}

func TestStreamLimit(t *testing.T) {
	srv, src := newServer(t, Config{MaxStreams: 1})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+observe.FlowsPath+"?follow=1", nil)
	req.Header.Set("Authorization", "Bearer viewer")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if r, body := get(t, srv, observe.FlowsPath, "viewer"); r.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "1 flow streams") {
		t.Errorf("second stream: %d %q", r.StatusCode, body)
	}
	cancel()
	<-src.returned
}

func TestBGP(t *testing.T) {
	srv, _ := newServer(t, Config{BGP: fakeBGP{}})
	resp, body := get(t, srv, observe.BGPPath, "viewer")
	var r status.PeersReply
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &r) != nil || r.Node != "node-1" || len(r.Peers) != 1 {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
}
