// Package nodestatus asks a node's tabby-node for its BGP sessions over the local status socket
// and prints them the way `calicoctl node status` does.
package nodestatus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tabbynet/tabby/apis/names"
	"github.com/tabbynet/tabby/bird/status"
	"github.com/tabbynet/tabby/ipam/rpc/api"
)

// DefaultSocket is where tabby-node's BGP speaker serves its status.
const DefaultSocket = status.DefaultSocket

// Peer is one BGP session as the status socket reports it.
type Peer struct {
	Address string    `json:"address"` // peer IP
	Type    string    `json:"type"`    // "node-to-node mesh", "global", "node specific", ...
	State   string    `json:"state"`   // up, start, ...
	Since   time.Time `json:"since"`   // last state change
	Info    string    `json:"info"`    // Established, Active, Connect, the last error...
	// Routes are received/accepted/sent per address family the session carries: "ipv4 3/3/1
	// ipv6 3/2/1"; "ipv6 not negotiated" when the peer did not offer the family, "ipv4 -"
	// while the session is not established.
	Routes string `json:"routes"`
	// Filters are the session's BGPFilters, in order.
	Filters []string `json:"filters,omitempty"`
	// BFD is the session's BFD state (up, init, down, admin down), empty without BFD.
	BFD string `json:"bfd,omitempty"`
	// Families are the address families the session carries or offers (ipv4, ipv6).
	Families []string `json:"families,omitempty"`
}

// Status is a node's BGP sessions and what keeps configured ones from existing, and the learned
// routes over several paths (ECMP) or from outside the pools.
type Status struct {
	Peers     []Peer
	Problems  []string
	Multipath int // learned routes over several paths
	Learned   []status.LearnedRoute
	// LearnedMore counts the routes left out of Learned.
	LearnedMore int
	// ServiceRoutes counts the host routes announced for Services; Services are the Services
	// announced (or held back for want of a local endpoint), ServicesMore those left out.
	ServiceRoutes int
	Services      []status.ServiceRoutes
	ServicesMore  int
}

// Source reads a node's BGP status. bird/status's client satisfies it through an adapter.
type Source interface {
	Status(ctx context.Context) (Status, error)
}

// NodeSocket is node's status socket under dir: dir/NAME/bird.sock when there is one, else
// dir/NAME/run/bird.sock (a node directory holding its run directory, as the lab lays it out).
// A run directory without the socket but with the mark of a node without BGP
// (names.BGPOffFile) is the node's too.
func NodeSocket(dir, node string) string {
	runDirs := []string{filepath.Join(dir, node), filepath.Join(dir, node, "run")}
	for _, name := range []string{filepath.Base(DefaultSocket), names.BGPOffFile} {
		for _, d := range runDirs {
			if fileExists(filepath.Join(d, name)) {
				return filepath.Join(d, filepath.Base(DefaultSocket))
			}
		}
	}
	return filepath.Join(runDirs[0], filepath.Base(DefaultSocket))
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// ErrNotRunning means nothing answered on the socket.
var ErrNotRunning = errors.New("tabby-node is not running")

// Report prints the status and returns ErrNotRunning (wrapped with the reason) when the node's
// tabby-node did not answer: then nothing is printed on w, the caller says it once, with the
// reason, and exits non-zero.
//
// A node whose tabby-node runs without BGP (--bgp=none) has no status socket: Report says BGP is
// off there, once the agent's IPAM socket beside it answers.
func Report(ctx context.Context, w io.Writer, socket string, dial func(socket string) (Source, func(), error), now time.Time) error {
	if _, err := os.Stat(socket); err != nil {
		if off, running := bgpOff(ctx, socket); off && running {
			fmt.Fprintln(w, "tabby-node is running with BGP off (--bgp=none): this node has no BGP sessions.")
			fmt.Fprintln(w, "Its pods are reached through VXLAN pools, routed from IPAM's block affinities (tabbyctl node dataplane).")
			return nil
		} else if off {
			return fmt.Errorf("%w: its last run had BGP off (--bgp=none), and its IPAM socket does not answer", ErrNotRunning)
		}
		return fmt.Errorf("%w: status socket %s: %v", ErrNotRunning, socket, err)
	}
	src, closeFn, err := dial(socket)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNotRunning, err)
	}
	defer closeFn()
	st, err := src.Status(ctx)
	if err != nil {
		return fmt.Errorf("%w: status socket %s did not answer: %v", ErrNotRunning, socket, err)
	}
	fmt.Fprintln(w, "tabby-node is running.")
	// One table per session address family, as calicoctl prints them; an IPv4 session of a
	// dual-stack node carries IPv6 too, which its ROUTES column shows.
	// A BFD column where some session runs BFD, a FILTERS column in a family's table where one
	// of its sessions has filters: calicoctl's table otherwise.
	withBFD := false
	for _, p := range st.Peers {
		withBFD = withBFD || p.BFD != ""
	}
	for _, fam := range []string{"IPv4", "IPv6"} {
		var rows [][]string
		filtered := false
		for _, p := range st.Peers {
			filtered = filtered || (isIPv6(p.Address) == (fam == "IPv6") && len(p.Filters) > 0)
		}
		for _, p := range st.Peers {
			if isIPv6(p.Address) == (fam == "IPv6") {
				row := []string{p.Address, p.Type, p.State, since(p.Since, now), p.Info, p.Routes}
				if withBFD {
					row = append(row, orDash(p.BFD))
				}
				if filtered {
					row = append(row, orDash(strings.Join(p.Filters, ",")))
				}
				rows = append(rows, row)
			}
		}
		fmt.Fprintf(w, "\n%s BGP status\n", fam)
		if len(rows) == 0 && fam == "IPv6" && ipv6OverIPv4(st.Peers) {
			fmt.Fprintln(w, "No IPv6 peers: IPv6 routes travel over the IPv4 sessions (their ipv6 counts in ROUTES above).")
			continue
		}
		if len(rows) == 0 {
			fmt.Fprintf(w, "No %s peers found.\n", fam)
			continue
		}
		header := []string{"PEER ADDRESS", "PEER TYPE", "STATE", "SINCE", "INFO", "ROUTES RECV/ACC/SENT"}
		if withBFD {
			header = append(header, "BFD")
		}
		if filtered {
			header = append(header, "FILTERS")
		}
		boxTable(w, header, rows)
	}
	if len(st.Learned) > 0 {
		fmt.Fprintf(w, "\nLearned routes over several paths (ECMP: %d) or from outside the pools\n", st.Multipath)
		var rows [][]string
		for _, r := range st.Learned {
			from := "pool"
			if r.External {
				from = "external"
			}
			rows = append(rows, []string{r.Prefix, strings.Join(r.NextHops, " "), from})
		}
		boxTable(w, []string{"PREFIX", "NEXT HOPS (BEST FIRST)", "FROM"}, rows)
		if st.LearnedMore > 0 {
			fmt.Fprintf(w, "and %d more\n", st.LearnedMore)
		}
	}
	if len(st.Services) > 0 {
		fmt.Fprintf(w, "\nServices announced to external peers (%d host routes)\n", st.ServiceRoutes)
		var rows [][]string
		for _, s := range st.Services {
			prefixes := strings.Join(s.Prefixes, " ")
			if prefixes == "" {
				prefixes = "-"
			}
			rows = append(rows, []string{s.Service, prefixes, s.Reason})
		}
		boxTable(w, []string{"SERVICE", "ROUTES", "WHY"}, rows)
		if st.ServicesMore > 0 {
			fmt.Fprintf(w, "and %d more\n", st.ServicesMore)
		}
	}
	if len(st.Problems) > 0 {
		fmt.Fprintln(w, "\nConfiguration problems (no session for these):")
		for _, p := range st.Problems {
			fmt.Fprintln(w, "  "+p)
		}
	}
	return nil
}

// bgpOff tells whether the run directory of socket says tabby-node runs without BGP
// (names.BGPOffFile), and whether a tabby-node answers there: its IPAM socket accepts a
// connection, so the mark is not one a stopped agent left behind.
func bgpOff(ctx context.Context, socket string) (off, running bool) {
	dir := filepath.Dir(socket)
	if _, err := os.Stat(filepath.Join(dir, names.BGPOffFile)); err != nil {
		return false, false
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", filepath.Join(dir, filepath.Base(api.DefaultSocket)))
	if err != nil {
		return true, false
	}
	conn.Close()
	return true, true
}

// ipv6OverIPv4 tells whether an IPv4 session carries IPv6 (MP-BGP), as a dual-stack node's mesh
// does.
func ipv6OverIPv4(peers []Peer) bool {
	for _, p := range peers {
		if !isIPv6(p.Address) && slices.Contains(p.Families, "ipv6") {
			return true
		}
	}
	return false
}

// isIPv6 tells an IPv6 peer address ("2001:db8::1" or "[2001:db8::1]:1179").
func isIPv6(addr string) bool { return strings.Count(addr, ":") > 1 }

// since is a time of day for today's changes and a date for older ones, as BIRD shows it.
func since(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	t = t.Local()
	if y, m, d := t.Date(); y == now.Year() && m == now.Month() && d == now.Day() {
		return t.Format("15:04:05")
	}
	return t.Format("2006-01-02")
}

// boxTable draws the +---+ table calicoctl users are used to reading.
func boxTable(w io.Writer, header []string, rows [][]string) {
	widths := make([]int, len(header))
	for i, h := range header {
		widths[i] = len(h)
	}
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], len(c))
		}
	}
	sep := "+"
	for _, wd := range widths {
		sep += strings.Repeat("-", wd+2) + "+"
	}
	line := func(cells []string, center bool) {
		var b strings.Builder
		b.WriteString("|")
		for i, c := range cells {
			pad := widths[i] - len(c)
			left := 0
			if center {
				left = pad / 2
			}
			b.WriteString(" " + strings.Repeat(" ", left) + c + strings.Repeat(" ", pad-left) + " |")
		}
		fmt.Fprintln(w, b.String())
	}
	fmt.Fprintln(w, sep)
	line(header, true)
	fmt.Fprintln(w, sep)
	for _, r := range rows {
		line(r, false)
	}
	fmt.Fprintln(w, sep)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
