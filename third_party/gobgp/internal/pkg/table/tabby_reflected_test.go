package table

// Tests of tabby's changes to GoBGP (TABBY.md).

import (
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/osrg/gobgp/v4/pkg/config/oc"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// reflectorRIB is a reflector's table for one block: client C's own path (path IDs given for
// add-path) and the copies a sibling reflector passed on, one per originator given.
type reflectorRIB struct {
	t       *testing.T
	table   *Table
	nlri    bgp.NLRI
	client  *PeerInfo
	sibling *PeerInfo
}

func newReflectorRIB(t *testing.T, clientType oc.PeerType) *reflectorRIB {
	nlri, _ := bgp.NewIPAddrPrefix(netip.MustParsePrefix("10.244.1.0/26"))
	peer := func(addr string, pt oc.PeerType) *PeerInfo {
		a := netip.MustParseAddr(addr)
		return &PeerInfo{PeerType: pt, AS: 64512, LocalAS: 64512, ID: a, Address: a, LocalID: netip.MustParseAddr("198.51.100.101")}
	}
	return &reflectorRIB{t: t, table: NewTable(slog.New(slog.DiscardHandler), bgp.RF_IPv4_UC), nlri: nlri,
		client: peer("198.51.100.11", clientType), sibling: peer("198.51.100.102", oc.PEER_TYPE_INTERNAL)}
}

func (r *reflectorRIB) path(src *PeerInfo, id uint32, originator string, withdraw bool) *Path {
	nh, _ := bgp.NewPathAttributeNextHop(netip.MustParseAddr("198.51.100.11"))
	attrs := []bgp.PathAttributeInterface{bgp.NewPathAttributeOrigin(0), bgp.NewPathAttributeAsPath(nil), nh, bgp.NewPathAttributeLocalPref(100)}
	if originator != "" {
		o, _ := bgp.NewPathAttributeOriginatorId(netip.MustParseAddr(originator))
		cl, _ := bgp.NewPathAttributeClusterList([]netip.Addr{netip.MustParseAddr("198.51.100.102")})
		attrs = append(attrs, o, cl, bgp.NewPathAttributeMultiExitDisc(1))
	}
	return NewPath(bgp.RF_IPv4_UC, src, bgp.PathNLRI{NLRI: r.nlri, ID: id}, withdraw, attrs, time.Now(), false)
}

// update applies p and returns what the reflector sends its clients for it: nil for nothing,
// else a path or a withdrawal.
func (r *reflectorRIB) update(p *Path) *Path {
	change, _, _ := r.table.update(p).GetChanges(GLOBAL_RIB_NAME, 0, false)
	return change
}

func (r *reflectorRIB) best() *Path {
	if d := r.table.GetDestination(r.nlri); d != nil {
		return d.GetBestPath(GLOBAL_RIB_NAME, 0)
	}
	return nil
}

func (r *reflectorRIB) known() int {
	d := r.table.GetDestination(r.nlri)
	if d == nil {
		return 0
	}
	return len(d.knownPathList)
}

// A client's withdrawal ends the sibling reflector's copies of that client's route at once: the
// reflector withdraws the block instead of passing the sibling's copy on, and the sibling's own
// withdrawal, when it comes, changes nothing. A session's end, another originator's copy, an
// eBGP source and an add-path client that keeps a path do not.
func TestClientWithdrawalDropsReflectedCopies(t *testing.T) {
	t.Run("client withdraws", func(t *testing.T) {
		r := newReflectorRIB(t, oc.PEER_TYPE_INTERNAL)
		r.update(r.path(r.client, 0, "", false))
		r.update(r.path(r.sibling, 0, "198.51.100.11", false))
		w := r.path(r.client, 0, "", true)
		w.SetWithdrawnBySource()
		if sent := r.update(w); sent == nil || !sent.IsWithdraw {
			t.Fatalf("after the client's withdrawal the reflector sends %v, want a withdrawal", sent)
		}
		if n := r.known(); n != 0 {
			t.Fatalf("%d paths left, want none", n)
		}
		if sent := r.update(r.path(r.sibling, 0, "198.51.100.11", true)); sent != nil || r.known() != 0 {
			t.Fatalf("the sibling's withdrawal sent %v, %d paths left", sent, r.known())
		}
		if sent := r.update(r.path(r.sibling, 0, "198.51.100.11", false)); sent == nil || sent.IsWithdraw {
			t.Fatalf("a copy sent again after the withdrawal: the reflector sends %v", sent)
		}
	})
	keeps := func(t *testing.T, r *reflectorRIB, w *Path, want int) {
		t.Helper()
		if sent := r.update(w); sent != nil && sent.IsWithdraw || r.best() == nil {
			t.Fatalf("the reflector withdrew the block (sent %v), want a remaining path", sent)
		}
		if n := r.known(); n != want {
			t.Fatalf("%d paths left, want %d", n, want)
		}
	}
	t.Run("session ends", func(t *testing.T) {
		r := newReflectorRIB(t, oc.PEER_TYPE_INTERNAL)
		r.update(r.path(r.client, 0, "", false))
		r.update(r.path(r.sibling, 0, "198.51.100.11", false))
		keeps(t, r, r.path(r.client, 0, "", true), 1) // dropped with the session: not marked
	})
	t.Run("another originator", func(t *testing.T) {
		r := newReflectorRIB(t, oc.PEER_TYPE_INTERNAL)
		r.update(r.path(r.client, 0, "", false))
		r.update(r.path(r.sibling, 0, "198.51.100.12", false))
		w := r.path(r.client, 0, "", true)
		w.SetWithdrawnBySource()
		keeps(t, r, w, 1)
	})
	t.Run("eBGP source", func(t *testing.T) {
		r := newReflectorRIB(t, oc.PEER_TYPE_EXTERNAL)
		r.update(r.path(r.client, 0, "", false))
		r.update(r.path(r.sibling, 0, "198.51.100.11", false))
		w := r.path(r.client, 0, "", true)
		w.SetWithdrawnBySource()
		keeps(t, r, w, 1)
	})
	t.Run("add-path client keeps a path", func(t *testing.T) {
		r := newReflectorRIB(t, oc.PEER_TYPE_INTERNAL)
		r.update(r.path(r.client, 1, "", false))
		r.update(r.path(r.client, 2, "", false))
		r.update(r.path(r.sibling, 0, "198.51.100.11", false))
		w := r.path(r.client, 1, "", true)
		w.SetWithdrawnBySource()
		keeps(t, r, w, 2)
	})
}
