package server

// Tests of tabby's changes to GoBGP (TABBY.md). Run by tabby's `make test`.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/internal/pkg/table"
	"github.com/osrg/gobgp/v4/pkg/config/oc"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

func testPath(t *testing.T, prefix string) []*table.Path {
	t.Helper()
	nlri, err := bgp.NewIPAddrPrefix(netip.MustParsePrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	nh, err := bgp.NewPathAttributeNextHop(netip.MustParseAddr("198.51.100.1"))
	if err != nil {
		t.Fatal(err)
	}
	attrs := []bgp.PathAttributeInterface{bgp.NewPathAttributeOrigin(0), bgp.NewPathAttributeAsPath(nil), nh}
	return []*table.Path{table.NewPath(bgp.RF_IPv4_UC, nil, bgp.PathNLRI{NLRI: nlri}, false, attrs, time.Now(), false)}
}

// A session's sender sends what was queued for it, whatever an earlier session of the same peer
// left on the outgoing channel (which outlives sessions): upstream queued a stop message there
// when a session ended, and a sender that had already returned on a write error never read it,
// so the next session's sender read it first and returned. That session then sent nothing: at
// 500 route-reflector clients, dozens of sessions never got their initial table.
func TestSenderSendsOnlyItsSession(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	f := newFSM(&oc.Global{}, &oc.Neighbor{}, bgp.BGP_FSM_ESTABLISHED, logger)
	h := &fsmHandler{fsm: f, outgoing: f.outgoingCh}

	// Session 1 is over; what it left behind: a path. (The stop message upstream also left
	// there no longer exists: the queue holds routes only.)
	f.session.Store(1)
	f.outgoingCh.push(&fsmOutgoingMsg{Paths: testPath(t, "10.244.1.0/26"), session: 1})
	// Session 2 is up: its initial table.
	f.session.Store(2)
	f.outgoingCh.push(&fsmOutgoingMsg{Paths: testPath(t, "10.244.2.0/26"), session: 2})
	f.outgoingCh.push(&fsmOutgoingMsg{Paths: testPath(t, "10.244.3.0/26"), session: 2})

	local, remote := net.Pipe()
	defer remote.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { _ = h.sendMessageloop(ctx, local, make(chan fsmStateReason, 3), &wg) }()
	defer func() { cancel(); local.Close(); wg.Wait() }()

	got := map[string]bool{}
	_ = remote.SetReadDeadline(time.Now().Add(10 * time.Second))
	for !got["10.244.3.0/26"] {
		var hdr [bgp.BGP_HEADER_LENGTH]byte
		if _, err := io.ReadFull(remote, hdr[:]); err != nil {
			t.Fatalf("session 2 got %v, then: %v", got, err)
		}
		h := &bgp.BGPHeader{}
		if err := h.DecodeFromBytes(hdr[:]); err != nil {
			t.Fatal(err)
		}
		body := make([]byte, int(h.Len)-bgp.BGP_HEADER_LENGTH)
		if _, err := io.ReadFull(remote, body); err != nil {
			t.Fatal(err)
		}
		m, err := bgp.ParseBGPBody(h, body)
		if err != nil {
			t.Fatal(err)
		}
		if u, ok := m.Body.(*bgp.BGPUpdate); ok {
			for _, n := range u.NLRI {
				got[n.NLRI.String()] = true
			}
		}
	}
	if got["10.244.1.0/26"] {
		t.Fatalf("session 2 sent session 1's path: %v", got)
	}
	if !got["10.244.2.0/26"] {
		t.Fatalf("session 2 did not send its first path: %v", got)
	}
}

// The hold timer measures the peer, not us: while the receiver is busy with an earlier message
// (its callback waits, as for the server's lock) and the peer's keepalives wait unread in the
// socket, the session stays up; once the peer goes quiet, the hold timer still ends it.
// Upstream ended it after the hold time whatever the peer had sent meanwhile.
func TestHoldTimerWaitsForABusyReceiver(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	conn, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	go func() { _, _ = io.Copy(io.Discard, peer) }() // our keepalives

	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	f := newFSM(&oc.Global{}, &oc.Neighbor{}, bgp.BGP_FSM_ESTABLISHED, logger)
	conf := f.pConf.ReadCopy()
	conf.Timers.State.NegotiatedHoldTime = 1
	f.pConf.Update(&conf)
	f.conn = conn
	release := make(chan struct{})
	h := &fsmHandler{fsm: f, outgoing: f.outgoingCh, callback: func(*fsmMsg) { <-release }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type end struct {
		state  bgp.FSMState
		reason *fsmStateReason
	}
	ended := make(chan end, 1)
	go func() {
		s, r := h.established(ctx)
		ended <- end{s, r}
	}()

	send := func(typ uint8, body []byte) {
		t.Helper()
		msg := make([]byte, bgp.BGP_HEADER_LENGTH, bgp.BGP_HEADER_LENGTH+len(body))
		for i := range 16 {
			msg[i] = 0xff
		}
		msg[16], msg[17], msg[18] = 0, byte(len(msg)+len(body)), typ
		if _, err := peer.Write(append(msg, body...)); err != nil {
			t.Fatal(err)
		}
	}
	keepalives := func(d time.Duration) {
		t.Helper()
		for deadline := time.Now().Add(d); time.Now().Before(deadline); {
			send(bgp.BGP_MSG_KEEPALIVE, nil)
			select {
			case e := <-ended:
				t.Fatalf("session ended while the peer sent keepalives: %v", e.reason)
			case <-time.After(300 * time.Millisecond):
			}
		}
	}
	send(bgp.BGP_MSG_UPDATE, []byte{0, 0, 0, 0}) // End-of-RIB: the receiver is busy with it
	keepalives(3 * time.Second)                  // three hold times, unread
	close(release)
	keepalives(2 * time.Second) // read now
	select {
	case e := <-ended:
		if e.reason.Type != fsmHoldTimerExpired {
			t.Fatalf("session ended by %v, want the hold timer", e.reason)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the hold timer did not end a session whose peer went quiet")
	}
}

// A session's keepalives start with it: while the handler of its Established state still
// runs (it builds the initial table under the server's lock), the peer hears from us. Upstream
// sent nothing from the OPEN exchange until the handler returned.
func TestKeepalivesStartWithTheSession(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	conn, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}

	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	f := newFSM(&oc.Global{}, &oc.Neighbor{}, bgp.BGP_FSM_OPENCONFIRM, logger)
	conf := f.pConf.ReadCopy()
	conf.Timers.Config.HoldTime, conf.Timers.Config.KeepaliveInterval = 3, 1
	conf.Timers.State.NegotiatedHoldTime, conf.Timers.State.KeepaliveInterval = 3, 1
	f.pConf.Update(&conf)
	f.conn = conn
	if f.recvOpen, err = bgp.NewBGPOpenMessage(65001, 3, netip.MustParseAddr("198.51.100.2"), nil); err != nil {
		t.Fatal(err)
	}
	// As after the OPEN exchange: a write deadline that passes while the handler runs.
	_ = conn.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	// The handler of the Established state does not return (it waits for the server's lock)
	// until the peer has had its keepalives.
	release := make(chan struct{})
	callback := func(m *fsmMsg) {
		if m.MsgType == fsmMsgStateChange && m.MsgData.(bgp.FSMState) == bgp.BGP_FSM_ESTABLISHED {
			<-release
		}
	}
	var wg sync.WaitGroup
	f.start(&wg, callback)
	defer func() { f.stop(); wg.Wait() }()
	defer close(release)

	keepalive := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 19, bgp.BGP_MSG_KEEPALIVE}
	if _, err := peer.Write(keepalive); err != nil { // OPENCONFIRM → ESTABLISHED
		t.Fatal(err)
	}
	// Two keepalives (interval 1 s) while the handler runs, within the hold time and a margin.
	_ = peer.SetReadDeadline(time.Now().Add(5 * time.Second))
	for got := 0; got < 2; got++ {
		var hdr [bgp.BGP_HEADER_LENGTH]byte
		if _, err := io.ReadFull(peer, hdr[:]); err != nil {
			t.Fatalf("%d keepalives while the handler runs, then: %v", got, err)
		}
		if hdr[18] != bgp.BGP_MSG_KEEPALIVE {
			t.Fatalf("message type %d while the handler runs", hdr[18])
		}
	}
}

// The same from the OPEN exchange on: the peer counts the session up once it has our OPEN and
// KEEPALIVE, while the handler of our move to OpenConfirm may still wait for the server's lock.
func TestKeepalivesWhileOpenConfirmIsHandled(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	conn, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}

	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	g := &oc.Global{Config: oc.GlobalConfig{As: 65001, RouterId: netip.MustParseAddr("198.51.100.1")}}
	n := &oc.Neighbor{Config: oc.NeighborConfig{PeerAs: 65001, NeighborAddress: netip.MustParseAddr("127.0.0.1")}}
	n.Timers.Config.HoldTime, n.Timers.Config.KeepaliveInterval = 3, 1
	f := newFSM(g, n, bgp.BGP_FSM_OPENSENT, logger)
	f.conn = conn
	f.outgoingConnMgr = &outgoingConnManager{}
	release := make(chan struct{})
	callback := func(m *fsmMsg) {
		if m.MsgType == fsmMsgStateChange && m.MsgData.(bgp.FSMState) == bgp.BGP_FSM_OPENCONFIRM {
			<-release
		}
	}
	var wg sync.WaitGroup
	f.start(&wg, callback)
	defer func() { f.stop(); wg.Wait() }()
	defer close(release)

	open, err := bgp.NewBGPOpenMessage(65001, 3, netip.MustParseAddr("198.51.100.2"), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := open.Serialize()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := peer.Write(b); err != nil { // OPENSENT → OPENCONFIRM
		t.Fatal(err)
	}
	// Our KEEPALIVE for the OPEN, then two more (interval 1 s) while the handler runs.
	_ = peer.SetReadDeadline(time.Now().Add(5 * time.Second))
	for got := 0; got < 3; got++ {
		var hdr [bgp.BGP_HEADER_LENGTH]byte
		if _, err := io.ReadFull(peer, hdr[:]); err != nil {
			t.Fatalf("%d keepalives since the OPEN, the handler still running, then: %v", got, err)
		}
		if hdr[18] != bgp.BGP_MSG_KEEPALIVE {
			t.Fatalf("message type %d while the handler runs", hdr[18])
		}
	}
}

// What a peer was sent is recorded per destination in the shared set for path identifier 0
// (no add-path), and withdrawing it from one peer leaves the others' record and the shared set
// alone.
func TestSentPathsShareTheIDZeroSet(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	newTestPeer := func() *peer { return &peer{fsm: newFSM(&oc.Global{}, &oc.Neighbor{}, bgp.BGP_FSM_ESTABLISHED, logger)} }
	a, b := newTestPeer(), newTestPeer()
	p1, p2 := testPath(t, "10.244.1.0/26")[0], testPath(t, "10.244.2.0/26")[0]
	a.updateRoutes(p1, p2)
	b.updateRoutes(p1)
	for _, c := range []struct {
		peer *peer
		path *table.Path
		want bool
	}{{a, p1, true}, {a, p2, true}, {b, p1, true}, {b, p2, false}} {
		if got := c.peer.hasPathAlreadyBeenSent(c.path); got != c.want {
			t.Fatalf("sent %v: %v, want %v", c.path.GetNlri(), got, c.want)
		}
	}
	a.updateRoutes(p1.Clone(true)) // withdrawn from a
	if a.hasPathAlreadyBeenSent(p1) || !a.hasPathAlreadyBeenSent(p2) || !b.hasPathAlreadyBeenSent(p1) {
		t.Fatal("a withdrawal from one peer changed another destination or peer")
	}
	if a.getRoutesCount(bgp.RF_IPv4_UC, p2.GetNlri().String()) != 1 || b.getRoutesCount(bgp.RF_IPv4_UC, p1.GetNlri().String()) != 1 {
		t.Fatal("a sent destination does not count one path")
	}
	if len(sentWithIDZero) != 1 {
		t.Fatalf("the shared set was modified: %v", sentWithIDZero)
	}
	if n := b.sentPaths.Len(); n != 1 {
		t.Fatalf("b has %d destinations, want 1", n)
	}
	a.resetAdvertisedRoutes()
	if a.sentPaths.Len() != 0 || a.hasPathAlreadyBeenSent(p2) || !b.hasPathAlreadyBeenSent(p1) {
		t.Fatal("a reset of one peer's record left it or touched another's")
	}
}

// The record of what peers were sent behaves as a map per peer from destination to the set of
// identifiers (the model), under random stores, deletes and resets on several peers, and the
// destinations' numbers go back once no peer holds them: a peer that is gone holds none, and
// records nothing more.
func TestSentPathsNumbered(t *testing.T) {
	keys := make([]table.PathDestLocalKey, 40)
	for i := range keys {
		keys[i] = table.PathDestLocalKey{Family: bgp.RF_IPv4_UC, Prefix: fmt.Sprintf("10.244.%d.0/26", 100+i)}
	}
	keys[1].Family = bgp.RF_IPv6_UC // the same prefix string in another family is another destination
	sets := []pathIDSet{sentWithIDZero, {0: {}}, {0: {}, 5: {}}, {7: {}}}
	rnd := rand.New(rand.NewPCG(1, 2))
	peers := make([]sentPathsMap, 4)
	model := make([]map[table.PathDestLocalKey]pathIDSet, len(peers))
	for i := range model {
		model[i] = map[table.PathDestLocalKey]pathIDSet{}
	}
	for step := range 20000 {
		p, k := rnd.IntN(len(peers)), keys[rnd.IntN(len(keys))]
		switch op := rnd.IntN(100); {
		case op < 55:
			v := sets[rnd.IntN(len(sets))]
			peers[p].Store(k, v)
			model[p][k] = v
		case op < 97:
			peers[p].Delete(k)
			delete(model[p], k)
		default:
			peers[p].Clear()
			clear(model[p])
		}
		for i := range peers {
			if peers[i].Len() != len(model[i]) {
				t.Fatalf("step %d: peer %d holds %d destinations, want %d", step, i, peers[i].Len(), len(model[i]))
			}
			paths := map[bgp.Family]int{}
			for k, v := range model[i] {
				paths[k.Family] += len(v)
			}
			for _, f := range []bgp.Family{bgp.RF_IPv4_UC, bgp.RF_IPv6_UC} {
				if got := peers[i].pathsSent(f); got != paths[f] {
					t.Fatalf("step %d: peer %d counts %d paths of %v sent, want %d", step, i, got, f, paths[f])
				}
			}
			for _, k := range keys {
				got, ok := peers[i].Load(k)
				want, wok := model[i][k]
				if ok != wok || !maps.Equal(got, want) {
					t.Fatalf("step %d: peer %d, %v: %v %v, want %v %v", step, i, k, got, ok, want, wok)
				}
			}
		}
	}
	for i := range peers {
		peers[i].close()
		peers[i].Store(keys[0], sentWithIDZero)
		if _, ok := peers[i].Load(keys[0]); ok || peers[i].Len() != 0 {
			t.Fatalf("peer %d, gone, recorded a destination", i)
		}
	}
	for _, k := range keys {
		if _, ok := destNumbers.lookup(k); ok {
			t.Fatalf("%v still numbered with no peer holding it", k)
		}
	}
}

// The paths counted as sent to a peer, what ListPeer reports as advertised, are the paths the
// peer was sent and not withdrawn since, with add-path (several identifiers per destination) and
// without, under random announcements and withdrawals.
func TestSentPathsCounted(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	plain := &peer{fsm: newFSM(&oc.Global{}, &oc.Neighbor{}, bgp.BGP_FSM_ESTABLISHED, logger)}
	addPath := &peer{fsm: newFSM(&oc.Global{}, &oc.Neighbor{}, bgp.BGP_FSM_ESTABLISHED, logger)}
	addPath.fsm.familyMap.Store(map[bgp.Family]bgp.BGPAddPathMode{bgp.RF_IPv4_UC: bgp.BGP_ADD_PATH_SEND})
	t.Cleanup(func() { plain.sentPaths.close(); addPath.sentPaths.close() })
	type sent struct {
		prefix string
		id     uint32
	}
	// Eight destinations with a path from each of three sources: the RIB gives each path of a
	// destination its own identifier.
	rib := table.NewTableManager(logger, []bgp.Family{bgp.RF_IPv4_UC})
	var paths []*table.Path
	for i := range 8 {
		for src := range 3 {
			p := testPath(t, fmt.Sprintf("10.244.%d.0/26", 200+i))[0]
			addr := netip.AddrFrom4([4]byte{198, 51, 100, byte(10 + src)})
			p = table.NewPath(bgp.RF_IPv4_UC, &table.PeerInfo{ID: addr, Address: addr}, bgp.PathNLRI{NLRI: p.GetNlri()}, false, p.GetPathAttrs(), time.Now(), false)
			rib.Update(p)
			paths = append(paths, p)
		}
	}
	model := map[*peer]map[sent]bool{plain: {}, addPath: {}}
	rnd := rand.New(rand.NewPCG(3, 4))
	for step := range 5000 {
		path := paths[rnd.IntN(len(paths))]
		if path.LocalID() == 0 {
			t.Fatal("the RIB gave a path no identifier")
		}
		withdraw := rnd.IntN(3) == 0
		if withdraw {
			path = path.Clone(true)
		}
		prefix := path.GetNlri().String()
		for p, m := range model {
			p.updateRoutes(path)
			id := p.advertisedPathID(path)
			if withdraw {
				delete(m, sent{prefix, id})
			} else {
				m[sent{prefix, id}] = true
			}
			if got := p.sentPaths.pathsSent(bgp.RF_IPv4_UC); got != len(m) {
				t.Fatalf("step %d (add-path %v): %d paths counted as sent, want %d", step, p == addPath, got, len(m))
			}
		}
	}
	if len(sentWithIDZero) != 1 {
		t.Fatalf("the shared set was modified: %v", sentWithIDZero)
	}
}

// A peer removed from the server gives its destinations' numbers back.
func TestDeletedPeerReleasesItsNumbers(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := NewBgpServer(LoggerOption(logger, nil))
	go s.Serve()
	t.Cleanup(s.Stop)
	ctx := context.Background()
	if err := s.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{Asn: 64512, RouterId: "198.51.100.1", ListenPort: -1}}); err != nil {
		t.Fatal(err)
	}
	const addr = "198.51.100.9"
	if err := s.AddPeer(ctx, &api.AddPeerRequest{Peer: &api.Peer{
		Conf:      &api.PeerConf{NeighborAddress: addr, PeerAsn: 64512},
		Transport: &api.Transport{PassiveMode: true},
	}}); err != nil {
		t.Fatal(err)
	}
	path := testPath(t, "10.244.250.0/26")[0]
	if err := s.mgmtOperation(func() error {
		s.neighborMap[netip.MustParseAddr(addr)].updateRoutes(path)
		return nil
	}, false); err != nil {
		t.Fatal(err)
	}
	if _, ok := destNumbers.lookup(path.GetDestLocalKey()); !ok {
		t.Fatal("a sent destination has no number")
	}
	if err := s.DeletePeer(ctx, &api.DeletePeerRequest{Address: addr}); err != nil {
		t.Fatal(err)
	}
	if _, ok := destNumbers.lookup(path.GetDestLocalKey()); ok {
		t.Fatal("a deleted peer still holds its destination's number")
	}
}

// BenchmarkSentPaths records 1,000 destinations sent to each of 1,000 peers, as a route
// reflector with 1,000 clients does, and reports the heap it keeps.
func BenchmarkSentPaths(b *testing.B) {
	paths := make([]*table.Path, 1000)
	for i := range paths {
		nlri, _ := bgp.NewIPAddrPrefix(netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(i / 4), byte(i % 4 * 64)}), 26))
		paths[i] = table.NewPath(bgp.RF_IPv4_UC, nil, bgp.PathNLRI{NLRI: nlri}, false, []bgp.PathAttributeInterface{bgp.NewPathAttributeOrigin(0)}, time.Now(), false)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	for b.Loop() {
		peers := make([]*peer, 1000)
		for i := range peers {
			peers[i] = &peer{fsm: newFSM(&oc.Global{}, &oc.Neighbor{}, bgp.BGP_FSM_ESTABLISHED, logger)}
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for _, p := range peers {
			p.updateRoutes(paths...)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "MB-kept")
		for _, p := range peers {
			p.resetAdvertisedRoutes()
		}
	}
}

// A peer's queue hands its sender everything pushed since the last batch, oldest first, up to
// the cap, and keeps its wake-up for the rest; a push never waits for the sender, and nothing
// pushed after the session's FSM stopped is kept.
func TestOutQueue(t *testing.T) {
	q := newOutQueue()
	for i := range 5 {
		q.push(&fsmOutgoingMsg{session: uint64(i)})
	}
	sessions := func(msgs []*fsmOutgoingMsg) (out []uint64) {
		for _, m := range msgs {
			out = append(out, m.session)
		}
		return out
	}
	<-q.ready
	if got := sessions(q.take(3)); !slices.Equal(got, []uint64{0, 1, 2}) {
		t.Fatalf("first batch %v, want [0 1 2]", got)
	}
	select {
	case <-q.ready:
	default:
		t.Fatal("no wake-up left for the two messages past the cap")
	}
	if got := sessions(q.take(3)); !slices.Equal(got, []uint64{3, 4}) {
		t.Fatalf("second batch %v, want [3 4]", got)
	}
	q.push(&fsmOutgoingMsg{session: 5})
	q.drain()
	if n := len(q.take(10)); n != 0 {
		t.Fatalf("%d messages after drain", n)
	}
	q.close()
	q.push(&fsmOutgoingMsg{session: 6})
	if n := len(q.take(10)); n != 0 {
		t.Fatalf("%d messages pushed after close kept", n)
	}
}

// recordingHandler keeps the messages of the records it takes, from the level it is set to.
type recordingHandler struct {
	level slog.Level
	mu    sync.Mutex
	msgs  []string
}

func (h *recordingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs = append(h.msgs, r.Message)
	return nil
}
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler      { return h }

func (h *recordingHandler) has(msg string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Contains(h.msgs, msg)
}

// A sent UPDATE is logged below debug: a handler that takes debug records (tabby's does, for
// connect failures) is not handed one record per UPDATE and session.
func TestSentUpdateLoggedBelowDebug(t *testing.T) {
	for _, c := range []struct {
		level slog.Level
		want  bool
	}{{slog.LevelDebug, false}, {levelTrace, true}} {
		h := &recordingHandler{level: c.level}
		f := newFSM(&oc.Global{}, &oc.Neighbor{}, bgp.BGP_FSM_ESTABLISHED, slog.New(h))
		s := &fsmHandler{fsm: f, outgoing: f.outgoingCh}
		f.session.Store(1)
		f.outgoingCh.push(&fsmOutgoingMsg{Paths: testPath(t, "10.244.1.0/26"), session: 1})
		local, remote := net.Pipe()
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { _ = s.sendMessageloop(ctx, local, make(chan fsmStateReason, 3), &wg) }()
		_ = remote.SetReadDeadline(time.Now().Add(10 * time.Second))
		// The whole UPDATE: a pipe's write returns once all of it is read.
		var hdr [bgp.BGP_HEADER_LENGTH]byte
		_, err := io.ReadFull(remote, hdr[:])
		if err == nil {
			_, err = io.ReadFull(remote, make([]byte, int(hdr[16])<<8|int(hdr[17])-bgp.BGP_HEADER_LENGTH))
		}
		cancel()
		local.Close()
		remote.Close()
		wg.Wait() // the sender logs before it takes its next batch: done once it returned
		if err != nil {
			t.Fatalf("no UPDATE sent: %v", err)
		}
		if got := h.has("sent update"); got != c.want {
			t.Errorf("handler at %v: sent update logged %v, want %v", c.level, got, c.want)
		}
	}
}
