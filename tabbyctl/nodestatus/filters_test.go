package nodestatus

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tabbynet/tabby/bird/status"
)

// TestReportFilters: a session's BGPFilters show in a FILTERS column, in order; a table whose
// sessions have none has no such column, and a session that cannot open for a missing filter
// says so.
func TestReportFilters(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "bird.sock")
	if err := os.WriteFile(socket, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.Local)
	var st Status
	for _, p := range []status.PeerStatus{
		{Address: "198.51.100.1", Type: "global", State: "established", Since: now.Add(-time.Minute), Filters: []string{"tor-in", "tor-out"}},
		{Address: "198.51.100.2", Type: "global", State: "not configured", Filters: []string{"nosuch"},
			Info: `bgppeer/tor2: BGPFilter "nosuch" does not exist or is invalid: the session stays down until it does`},
		{Address: "198.51.100.12", Type: "mesh", State: "established", Since: now.Add(-time.Minute)},
		{Address: "2001:db8:100::1", Type: "global", State: "established", Since: now.Add(-time.Minute)},
	} {
		st.Peers = append(st.Peers, FromStatus(p))
	}
	var out bytes.Buffer
	if err := Report(context.Background(), &out, socket, func(string) (Source, func(), error) { return fakeSource{st}, func() {}, nil }, now); err != nil {
		t.Fatal(err)
	}
	v4, v6, _ := strings.Cut(out.String(), "IPv6 BGP status")
	for _, want := range []string{"FILTERS     |", "| tor-in,tor-out |", `BGPFilter "nosuch" does not exist`, "| nosuch "} {
		if !strings.Contains(v4, want) {
			t.Errorf("IPv4 table lacks %q:\n%s", want, v4)
		}
	}
	if strings.Contains(v6, "FILTERS") {
		t.Errorf("IPv6 table without filters has a FILTERS column:\n%s", v6)
	}
}
