package ui_test

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

	"github.com/tabbynet/tabby/apis/flow"
	"github.com/tabbynet/tabby/bird/status"
	"github.com/tabbynet/tabby/internal/testwait"
	"github.com/tabbynet/tabby/ui"
	"github.com/tabbynet/tabby/ui/uifake"
)

func record(verdict flow.Verdict, from, to, rule string) flow.Record {
	now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	ns, pod, _ := strings.Cut(from, "/")
	dns, dpod, _ := strings.Cut(to, "/")
	return flow.Record{Start: now, End: now.Add(5 * time.Second), Node: "node-1",
		Src:      flow.Endpoint{Namespace: ns, Pod: pod, IP: netip.MustParseAddr("10.244.0.5")},
		Dst:      flow.Endpoint{Namespace: dns, Pod: dpod, IP: netip.MustParseAddr("10.244.1.7")},
		Protocol: "TCP", DstPort: 8080, Verdict: verdict, Direction: "ingress", Rule: rule, Connections: 1, Packets: 1, Bytes: 60}
}

// events reads Server-Sent Events from body, sending each "flow" event's record.
func events(t *testing.T, body io.Reader) <-chan flow.Record {
	out := make(chan flow.Record, 16)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(body)
		var event string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && event == "flow":
				var r flow.Record
				if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &r); err != nil {
					t.Errorf("flow event %q: %v", line, err)
					return
				}
				out <- r
			case line == "":
				event = ""
			}
		}
	}()
	return out
}

func next(t *testing.T, c <-chan flow.Record) flow.Record {
	t.Helper()
	select {
	case r, ok := <-c:
		if !ok {
			t.Fatal("flow stream ended")
		}
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("no flow event within 30s")
	}
	return flow.Record{}
}

func TestFlowStream(t *testing.T) {
	b := &uifake.Backend{}
	old := record(flow.Deny, "demo/client", "demo/server", "NetworkPolicy demo/deny-all ingress (no rule matched)")
	b.Push(old)
	b.Push(record(flow.Allow, "demo/client", "demo/web", "no policy"))
	srv := httptest.NewServer(ui.NewHandler(b, ui.Options{Heartbeat: 50 * time.Millisecond}))
	defer srv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/flows?verdict=deny&to=demo/", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	c := events(t, resp.Body)
	if got := next(t, c); got != old {
		t.Errorf("first event %+v, want the kept denied record %+v", got, old)
	}
	// Following: a new allowed record is filtered out, a new denied one arrives.
	testwait.Until(t, "the stream to follow", 30*time.Second, func() bool { return b.Followers() == 1 })
	b.Push(record(flow.Allow, "demo/client", "demo/server", "no policy"))
	fresh := record(flow.Deny, "other/a", "demo/db", `AdminNetworkPolicy block-db ingress rule 0 "deny-web" (Deny)`)
	b.Push(fresh)
	if got := next(t, c); got != fresh {
		t.Errorf("followed event %+v, want %+v", got, fresh)
	}
	// The page going away ends the backend's stream.
	cancel()
	testwait.Until(t, "the backend's stream to end with the page's", 30*time.Second, func() bool { return b.Followers() == 0 })
}

func TestFlowStreamBadFilter(t *testing.T) {
	srv := httptest.NewServer(ui.NewHandler(&uifake.Backend{}, ui.Options{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/api/flows?verdict=maybe")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `verdict: Unsupported value: "maybe"`) {
		t.Errorf("bad verdict: %d %q, want 400 naming the field and value", resp.StatusCode, body)
	}
	resp, err = http.Get(srv.URL + "/api/flows?to=" + url.QueryEscape("/web"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `to: Invalid value: "/web"`) {
		t.Errorf("bad to: %d %q, want 400 naming the field and value", resp.StatusCode, body)
	}
}

func TestTopologyEndpoint(t *testing.T) {
	b := &uifake.Backend{}
	replies := []status.NodeReply{
		{Node: "node-1", Reply: &status.PeersReply{Node: "node-1", RouterID: "198.51.100.11", ASN: 64512,
			Peers: []status.PeerStatus{{Address: "198.51.100.12", Node: "node-2", Type: "mesh", State: "established"}}}},
		{Node: "node-2", Err: "connection refused"},
	}
	b.SetBGP(replies, nil)
	srv := httptest.NewServer(ui.NewHandler(b, ui.Options{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/api/topology")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got ui.Topology
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(ui.BuildTopology(replies))
	gotJSON, _ := json.Marshal(got)
	if string(want) != string(gotJSON) {
		t.Errorf("topology %s, want %s", gotJSON, want)
	}

	b.SetBGP(nil, errors.New("list nodes: forbidden"))
	resp, err = http.Get(srv.URL + "/api/topology")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "forbidden") {
		t.Errorf("backend error: %d %q, want 502 with the cause", resp.StatusCode, body)
	}
}

// The page and its assets come from the binary, and the page may load nothing from elsewhere.
func TestPage(t *testing.T) {
	srv := httptest.NewServer(ui.NewHandler(&uifake.Backend{}, ui.Options{}))
	defer srv.Close()
	get := func(path string) (string, http.Header) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
		return string(body), resp.Header
	}
	page, h := get("/")
	if !strings.Contains(page, `src="./assets/index.js"`) || !strings.Contains(page, `href="./assets/index.css"`) {
		t.Errorf("page does not load the embedded assets:\n%s", page)
	}
	if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	for _, p := range []string{"/assets/index.js", "/assets/index.css"} {
		body, _ := get(p)
		// The SVG namespace is a name, not a fetch.
		body = strings.ReplaceAll(body, "http://www.w3.org/2000/svg", "")
		if strings.Contains(body, "http://") || strings.Contains(body, "https://") || strings.Contains(body, "//fonts.") {
			t.Errorf("%s names an outside address", p)
		}
	}
}
