package bird

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/bird/internal/netnstest"
	"github.com/tabbynet/tabby/bird/status"
)

// TestStatusServiceAndMetrics: the unix-socket status service lists the sessions for tabbyctl,
// and the collectors export sessions by state and route counts.
func TestStatusServiceAndMetrics(t *testing.T) {
	netnstest.Require(t)
	sock := filepath.Join(t.TempDir(), "bird.sock")
	all := []model.Node{mkNode(81, nil, ""), mkNode(82, nil, "")}
	a := startNode(t, all[0], all, nil, func(c *Config) { c.StatusSocket = sock })
	b := startNode(t, all[1], all, nil)
	a.routes.waitRoute(t, b.block, addr4(b.Node), 15*time.Second)

	c, err := status.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var r *status.PeersReply
	for {
		if r, err = c.Peers(ctx); err == nil && len(r.Peers) == 1 && r.Peers[0].State == "established" && r.RoutesLearned == 1 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("status: %+v, %v", r, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	p := r.Peers[0]
	if p.Address != "198.51.100.82" || p.Type != "mesh" || p.Node != "node82" || p.Since.IsZero() || p.RoutesReceived != 1 || p.RoutesAccepted != 1 || p.RoutesSent != 1 {
		t.Errorf("peer status: %+v", p)
	}
	if r.RouterID != "198.51.100.81" || r.ASN != 64512 || r.RoutesAdvertised != 1 {
		t.Errorf("reply: %+v", r)
	}

	got := gather(t, a)
	for k, v := range map[string]float64{
		"tabby_bgp_routes_advertised":                    1,
		"tabby_bgp_routes_learned":                       1,
		"tabby_bgp_sessions,state=established,type=mesh": 1,
		"tabby_bgp_routes_received,peer=198.51.100.82":   1,
		"tabby_bgp_routes_accepted,peer=198.51.100.82":   1,
		"tabby_bgp_routes_sent,peer=198.51.100.82":       1,
	} {
		if got[k] != v {
			t.Errorf("metric %s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	if v, ok := got["tabby_bgp_seconds_since_last_update"]; !ok || v < 0 {
		t.Errorf("seconds since last update: %v %v", v, ok)
	}
}

// TestGoBGPAPIOnlyOnLoopback: GoBGP's own API cannot be put on a node address.
func TestGoBGPAPIOnlyOnLoopback(t *testing.T) {
	_, err := New(Config{NodeName: "x", GoBGPAPI: "198.51.100.1:50051"})
	if err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("New with the API on a node address: %v", err)
	}
	if _, err := New(Config{NodeName: "x", GoBGPAPI: "127.0.0.1:50051"}); err != nil {
		t.Fatal(err)
	}
}
