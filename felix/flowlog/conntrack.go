package flowlog

import (
	"fmt"

	"github.com/mdlayher/netlink"
	"github.com/ti-mo/conntrack"
	"github.com/ti-mo/netfilter"
)

// ctReader follows conntrack's DESTROY events of the current network namespace.
type ctReader struct {
	c      *conntrack.Conn
	events chan conntrack.Event
	errs   chan error
}

func openConntrack() (*ctReader, error) {
	c, err := conntrack.Dial(nil)
	if err != nil {
		return nil, fmt.Errorf("conntrack: open netlink socket: %w", err)
	}
	// An overflow of the socket's buffer loses events (those connections' counts), not the
	// subscription.
	_ = c.SetReadBuffer(1 << 22)
	_ = c.SetOption(netlink.NoENOBUFS, true)
	r := &ctReader{c: c, events: make(chan conntrack.Event, 1024)}
	r.errs, err = c.Listen(r.events, 1, []netfilter.NetlinkGroup{netfilter.GroupCTDestroy})
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("conntrack: subscribe to destroy events: %w", err)
	}
	return r, nil
}

// connEvent is e as the joiner takes it: the tuple the policy chains saw (the original source,
// the destination after DNAT: the reply's source), both directions' counters.
func connEvent(e conntrack.Event) (ConnEvent, bool) {
	if e.Flow == nil || e.Type != conntrack.EventDestroy {
		return ConnEvent{}, false
	}
	f := e.Flow
	ce := ConnEvent{
		Tuple: Tuple{
			Proto: f.TupleOrig.Proto.Protocol,
			Src:   f.TupleOrig.IP.SourceAddress, SrcPort: f.TupleOrig.Proto.SourcePort,
			Dst: f.TupleReply.IP.SourceAddress, DstPort: f.TupleReply.Proto.SourcePort,
		},
		Packets: f.CountersOrig.Packets + f.CountersReply.Packets,
		Bytes:   f.CountersOrig.Bytes + f.CountersReply.Bytes,
	}
	if !ce.Tuple.Dst.IsValid() {
		ce.Tuple.Dst, ce.Tuple.DstPort = f.TupleOrig.IP.DestinationAddress, f.TupleOrig.Proto.DestinationPort
	}
	return ce, true
}

func (r *ctReader) close() error { return r.c.Close() }
