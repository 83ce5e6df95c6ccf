package nodestatus

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tabbynet/tabby/apis/names"
	"github.com/tabbynet/tabby/bird/status"
)

type fakeSource struct{ st Status }

func (f fakeSource) Status(context.Context) (Status, error) { return f.st, nil }

// TestReportPerFamily: each session shows the families it carries, with routes received,
// accepted and sent when negotiated, "not negotiated" for a family the peer did not offer, and
// nothing counted before the session is up; an older tabby-node's reply (no family state) still
// prints, with the accepted count unknown.
func TestReportPerFamily(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "bird.sock")
	if err := os.WriteFile(socket, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.Local)
	peers := []status.PeerStatus{
		{Address: "198.51.100.12", Type: "mesh", State: "established", Since: now.Add(-time.Minute), Families: []status.FamilyRoutes{
			{Family: "ipv4", State: status.FamilyUp, Received: 1, Accepted: 1, Sent: 1},
			{Family: "ipv6", State: status.FamilyUp, Received: 2, Accepted: 1, Sent: 1}}},
		{Address: "198.51.100.1", Type: "global", State: "established", Since: now.Add(-time.Minute), Families: []status.FamilyRoutes{
			{Family: "ipv4", State: status.FamilyUp, Received: 3, Accepted: 2, Sent: 2},
			{Family: "ipv6", State: status.FamilyNotNegotiated}}},
		{Address: "198.51.100.13", Type: "mesh", State: "active", Families: []status.FamilyRoutes{
			{Family: "ipv4", State: status.FamilyOffered}, {Family: "ipv6", State: status.FamilyOffered}}},
		{Address: "[2001:db8:100::1]:1179", Type: "global", State: "established", Since: now.Add(-time.Minute), Families: []status.FamilyRoutes{
			{Family: "ipv6", Received: 3, Sent: 1}}}, // from a tabby-node without the family state
	}
	st := Status{Multipath: 1, LearnedMore: 3, Learned: []status.LearnedRoute{
		{Prefix: "0.0.0.0/0", NextHops: []string{"198.51.100.1"}, External: true},
		{Prefix: "10.244.7.0/26", NextHops: []string{"198.51.100.2", "198.51.100.1"}},
	}}
	for _, p := range peers {
		st.Peers = append(st.Peers, FromStatus(p))
	}
	dial := func(string) (Source, func(), error) { return fakeSource{st}, func() {}, nil }
	var out bytes.Buffer
	if err := Report(context.Background(), &out, socket, dial, now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| ROUTES RECV/ACC/SENT |",
		"| Established | ipv4 1/1/1 ipv6 2/1/1",
		"| Established | ipv4 3/2/2 ipv6 not negotiated |",
		"| Active      | ipv4 - ipv6 -",
		"| Established | ipv6 3/?/1",
		"Learned routes over several paths (ECMP: 1) or from outside the pools",
		"| 0.0.0.0/0     | 198.51.100.1              | external |",
		"| 10.244.7.0/26 | 198.51.100.2 198.51.100.1 | pool     |",
		"and 3 more",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("node status lacks %q:\n%s", want, out.String())
		}
	}
}

// TestReportBFD: a BFD column appears once a session runs BFD, with "-" for the others.
func TestReportBFD(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "bird.sock")
	if err := os.WriteFile(socket, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.Local)
	st := Status{Peers: []Peer{
		FromStatus(status.PeerStatus{Address: "198.51.100.1", Type: "global", State: "established", BFD: "up"}),
		FromStatus(status.PeerStatus{Address: "198.51.100.12", Type: "mesh", State: "established"}),
	}}
	dial := func(string) (Source, func(), error) { return fakeSource{st}, func() {}, nil }
	var out bytes.Buffer
	if err := Report(context.Background(), &out, socket, dial, now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| ROUTES RECV/ACC/SENT | BFD |", "| up  |", "| -   |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("node status lacks %q:\n%s", want, out.String())
		}
	}
}

// A node running without BGP has no status socket: node status says BGP is off there while its
// tabby-node answers on the IPAM socket, and that it is not running once nothing answers.
func TestReportBGPOff(t *testing.T) {
	nodes := t.TempDir()
	dir := filepath.Join(nodes, "n1", "run") // the lab's layout
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, names.BGPOffFile), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := NodeSocket(nodes, "n1"); got != filepath.Join(dir, "bird.sock") {
		t.Fatalf("NodeSocket = %s, want the socket's place in the run directory that has the mark", got)
	}
	l, err := net.Listen("unix", filepath.Join(dir, "ipam.sock"))
	if err != nil {
		t.Fatal(err)
	}
	dial := func(string) (Source, func(), error) {
		t.Fatal("dialled a status socket that does not exist")
		return nil, nil, nil
	}
	var out bytes.Buffer
	if err := Report(context.Background(), &out, filepath.Join(dir, "bird.sock"), dial, time.Now()); err != nil {
		t.Fatalf("BGP off: %v", err)
	}
	if !strings.Contains(out.String(), "BGP off") || strings.Contains(out.String(), "not running") {
		t.Fatalf("node status of a node without BGP:\n%s", out.String())
	}
	l.Close()
	out.Reset()
	err = Report(context.Background(), &out, filepath.Join(dir, "bird.sock"), dial, time.Now())
	if !errors.Is(err, ErrNotRunning) || !strings.Contains(err.Error(), "BGP off") || out.Len() != 0 {
		t.Fatalf("BGP off, tabby-node stopped: %v, printed %q", err, out.String())
	}
}

// TestReportIPv6OverIPv4Sessions: a dual-stack node's mesh runs over IPv4 sessions that carry
// IPv6 too; its IPv6 table says so instead of "no peers". A node whose sessions carry IPv4 alone
// has no IPv6 peers.
func TestReportIPv6OverIPv4Sessions(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "bird.sock")
	if err := os.WriteFile(socket, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.Local)
	report := func(fams ...string) string {
		t.Helper()
		var fr []status.FamilyRoutes
		for _, f := range fams {
			fr = append(fr, status.FamilyRoutes{Family: f, State: status.FamilyUp, Received: 1, Accepted: 1, Sent: 1})
		}
		st := Status{Peers: []Peer{FromStatus(status.PeerStatus{Address: "198.51.100.12", Type: "mesh", State: "established", Since: now, Families: fr})}}
		dial := func(string) (Source, func(), error) { return fakeSource{st}, func() {}, nil }
		var out bytes.Buffer
		if err := Report(context.Background(), &out, socket, dial, now); err != nil {
			t.Fatal(err)
		}
		_, v6, _ := strings.Cut(out.String(), "IPv6 BGP status\n")
		return v6
	}
	if got, want := report("ipv4", "ipv6"), "No IPv6 peers: IPv6 routes travel over the IPv4 sessions (their ipv6 counts in ROUTES above).\n"; got != want {
		t.Errorf("dual-stack mesh over IPv4: IPv6 table %q, want %q", got, want)
	}
	if got, want := report("ipv4"), "No IPv6 peers found.\n"; got != want {
		t.Errorf("IPv4-only sessions: IPv6 table %q, want %q", got, want)
	}
}
