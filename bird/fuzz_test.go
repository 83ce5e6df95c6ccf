package bird

import (
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/bird/speaker"
)

// FuzzBestPaths drives bird's handling of best paths (what becomes a dataplane route) with
// arbitrary event sequences. Invariants: only a prefix inside a pool, learned from a peer with a
// next hop of its own family, reaches the dataplane; a withdrawal is only ever sent for a prefix
// that was sent; and the routes told equal the last learned best path of each prefix.
func FuzzBestPaths(f *testing.F) {
	f.Add([]byte{10, 244, 1, 0, 26, 198, 51, 100, 7, 1, 0})
	f.Add([]byte{10, 244, 1, 0, 26, 198, 51, 100, 7, 1, 0, 10, 244, 1, 0, 26, 198, 51, 100, 7, 1, 1})
	f.Add([]byte{10, 0, 0, 0, 8, 198, 51, 100, 7, 1, 0, 10, 244, 9, 9, 32, 0, 0, 0, 0, 1, 4})
	f.Fuzz(func(t *testing.T, data []byte) {
		told := map[netip.Prefix]netip.Addr{}
		var fail string
		b, err := New(Config{NodeName: "fuzz", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Routes: func(msg any) {
			switch m := msg.(type) {
			case model.RouteUpdate:
				switch {
				case !pool.Contains(m.Prefix.Addr()) || m.Prefix.Bits() < pool.Bits():
					fail = "route outside the pool: " + m.Prefix.String()
				case !m.NextHop.Is4():
					fail = "IPv4 route with next hop " + m.NextHop.String()
				default:
					told[m.Prefix] = m.NextHop
				}
			case model.RouteRemove:
				if _, ok := told[m.Prefix]; !ok {
					fail = "withdrawal of a route never sent: " + m.Prefix.String()
				}
				delete(told, m.Prefix)
			default:
				fail = fmt.Sprintf("route sink got %T", msg)
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
		b.OnUpdate(poolUpdate(pool))
		want := map[netip.Prefix]netip.Addr{}
		for len(data) >= 11 {
			c := data[:11]
			data = data[11:]
			prefix, err := netip.AddrFrom4([4]byte(c[0:4])).Prefix(int(c[4] % 33))
			if err != nil {
				continue
			}
			e := speaker.Event{Type: speaker.BestPath, Prefix: prefix, Withdrawn: c[10]&1 != 0, Time: time.Now()}
			if c[9]&1 != 0 {
				e.Peer = netip.MustParseAddr("198.51.100.9")
			}
			switch {
			case c[10]&4 != 0:
				e.NextHop = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: c[8]})
			case c[10]&2 == 0:
				e.NextHop = netip.AddrFrom4([4]byte(c[5:9]))
			}
			b.onBest(e)
			if fail != "" {
				t.Fatalf("%s (after event %+v)", fail, e)
			}
			learned := !e.Withdrawn && e.Peer.IsValid() && e.NextHop.Is4() && pool.Contains(prefix.Addr()) && prefix.Bits() >= pool.Bits()
			if learned {
				want[prefix] = e.NextHop
			} else {
				delete(want, prefix)
			}
		}
		if len(told) != len(want) {
			t.Fatalf("dataplane has %v, want %v", told, want)
		}
		for p, nh := range want {
			if told[p] != nh {
				t.Fatalf("dataplane has %v, want %v", told, want)
			}
		}
	})
}
