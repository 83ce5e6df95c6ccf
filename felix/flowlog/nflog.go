package flowlog

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"

	"github.com/mdlayher/netlink"
	"github.com/ti-mo/netfilter"

	"github.com/tabbynet/tabby/felix/policy"
)

// Group is the NFLOG group felix's policy rules log to and the reader binds.
const Group = policy.FlowLogGroup

// nfnetlink_log, from linux/netfilter/nfnetlink_log.h.
const (
	nfulnlMsgPacket = 0
	nfulnlMsgConfig = 1

	nfulaCfgCmd     = 1
	nfulaCfgMode    = 2
	nfulaCfgNLBufSz = 3
	nfulaCfgTimeout = 4
	nfulaCfgQThresh = 5

	nfulnlCfgCmdBind = 1
	nfulnlCopyPacket = 2

	nfulaPayload = 9
	nfulaPrefix  = 10

	// copyRange is enough of each packet for its IP and transport headers.
	copyRange = 128
	// Batching: up to policy.FlowLogThreshold packets a message, in a buffer of nlBufSize,
	// sent at the latest after flushTimeout hundredths of a second.
	nlBufSize    = 65536
	flushTimeout = 10
)

// nflogReader reads the packets the kernel logs to Group.
type nflogReader struct {
	c *netfilter.Conn
}

// openNFLOG binds Group on a new socket of the current network namespace. Only one socket of a
// namespace can bind a group: a second felix there gets EBUSY.
func openNFLOG() (*nflogReader, error) {
	c, err := netfilter.Dial(nil)
	if err != nil {
		return nil, fmt.Errorf("nflog: open netlink socket: %w", err)
	}
	// Bursts of denied packets queue in the socket; a larger buffer loses fewer, and an overflow
	// loses packets, not the reader.
	_ = c.SetReadBuffer(1 << 21)
	_ = c.SetOption(netlink.NoENOBUFS, true)
	if err := configNFLOG(c, []netfilter.Attribute{{Type: nfulaCfgCmd, Data: []byte{nfulnlCfgCmdBind}}}); err != nil {
		c.Close()
		return nil, fmt.Errorf("nflog: bind group %d: %w", Group, err)
	}
	mode := make([]byte, 6)
	binary.BigEndian.PutUint32(mode, copyRange)
	mode[4] = nfulnlCopyPacket
	if err := configNFLOG(c, []netfilter.Attribute{
		{Type: nfulaCfgMode, Data: mode},
		{Type: nfulaCfgNLBufSz, Data: binary.BigEndian.AppendUint32(nil, nlBufSize)},
		{Type: nfulaCfgTimeout, Data: binary.BigEndian.AppendUint32(nil, flushTimeout)},
		{Type: nfulaCfgQThresh, Data: binary.BigEndian.AppendUint32(nil, policy.FlowLogThreshold)},
	}); err != nil {
		c.Close()
		return nil, fmt.Errorf("nflog: configure group %d: %w", Group, err)
	}
	return &nflogReader{c: c}, nil
}

func configNFLOG(c *netfilter.Conn, attrs []netfilter.Attribute) error {
	m, err := netfilter.MarshalNetlink(netfilter.Header{
		SubsystemID: netfilter.NFSubsysULOG, MessageType: nfulnlMsgConfig,
		Family: netfilter.ProtoUnspec, ResourceID: Group,
		Flags: netlink.Request | netlink.Acknowledge,
	}, attrs)
	if err != nil {
		return err
	}
	_, err = c.Query(m)
	return err
}

// read blocks for the next batch of logged packets.
func (r *nflogReader) read() ([]Packet, error) {
	msgs, err := r.c.Receive()
	if err != nil {
		return nil, err
	}
	out := make([]Packet, 0, len(msgs))
	for _, m := range msgs {
		h, attrs, err := netfilter.UnmarshalNetlink(m)
		if err != nil || h.SubsystemID != netfilter.NFSubsysULOG || h.MessageType != nfulnlMsgPacket {
			continue
		}
		var p Packet
		var payload []byte
		for _, a := range attrs {
			switch a.Type {
			case nfulaPrefix:
				p.Prefix = strings.TrimRight(string(a.Data), "\x00")
			case nfulaPayload:
				payload = a.Data
			}
		}
		var ok bool
		if p.Tuple, p.Len, ok = ParseIP(payload); ok && p.Prefix != "" {
			out = append(out, p)
		}
	}
	return out, nil
}

// close closes the socket, which unbinds the group (the kernel drops a closed socket's
// instances); an unbind request here would race the reader for its acknowledgement.
func (r *nflogReader) close() error { return r.c.Close() }

// ParseIP reads a packet's tuple and length from its IP header (and the transport header's
// ports when present).
func ParseIP(b []byte) (Tuple, uint64, bool) {
	if len(b) < 1 {
		return Tuple{}, 0, false
	}
	var t Tuple
	var l4 []byte
	var length uint64
	switch b[0] >> 4 {
	case 4:
		if len(b) < 20 {
			return Tuple{}, 0, false
		}
		ihl := int(b[0]&0x0f) * 4
		t.Proto = b[9]
		t.Src = netip.AddrFrom4([4]byte(b[12:16]))
		t.Dst = netip.AddrFrom4([4]byte(b[16:20]))
		length = uint64(binary.BigEndian.Uint16(b[2:4]))
		if ihl >= 20 && len(b) >= ihl {
			l4 = b[ihl:]
		}
	case 6:
		if len(b) < 40 {
			return Tuple{}, 0, false
		}
		t.Proto = b[6]
		t.Src = netip.AddrFrom16([16]byte(b[8:24]))
		t.Dst = netip.AddrFrom16([16]byte(b[24:40]))
		length = 40 + uint64(binary.BigEndian.Uint16(b[4:6]))
		l4 = b[40:]
	default:
		return Tuple{}, 0, false
	}
	switch t.Proto {
	case 6, 17, 132:
		if len(l4) >= 4 {
			t.SrcPort = binary.BigEndian.Uint16(l4[0:2])
			t.DstPort = binary.BigEndian.Uint16(l4[2:4])
		}
	}
	return t, length, true
}
