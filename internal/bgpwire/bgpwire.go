// Package bgpwire is a minimal BGP-4 speaker for tests and benchmarks: it opens a session from raw bytes and
// sends UPDATEs built from raw parts, so a test can hand a real BGP implementation what no
// well-behaved router would send (attributes that lie about their length, a withdrawn-routes
// length past the end of the message). It imports no BGP library on purpose.
package bgpwire

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"
)

// Message types (RFC 4271 section 4.1).
const (
	MsgOpen         = 1
	MsgUpdate       = 2
	MsgNotification = 3
	MsgKeepalive    = 4
)

// Attribute flags and type codes (RFC 4271 section 4.3).
const (
	FlagOptional   = 0x80
	FlagTransitive = 0x40
	FlagExtended   = 0x10

	AttrOrigin  = 1
	AttrASPath  = 2
	AttrNextHop = 3
)

// Notification is a NOTIFICATION the peer sent.
type Notification struct{ Code, Subcode uint8 }

func (n Notification) String() string { return fmt.Sprintf("NOTIFICATION %d/%d", n.Code, n.Subcode) }

// Session is an open BGP session driven by a test.
type Session struct {
	conn net.Conn
	wmu  sync.Mutex

	mu      sync.Mutex
	notifs  []Notification
	updates []Received
	closed  chan struct{}
	err     error
}

// Config says who the test peer is.
type Config struct {
	Local, Remote netip.Addr
	Port          uint16 // 0: 179
	ASN           uint32
	HoldTime      uint16 // 0: 9
	// IPv6 offers IPv6 unicast beside IPv4 unicast (MP-BGP over one session).
	IPv6 bool
	// GracefulRestart announces the capability (RFC 4724, restart time 120 s) for the families
	// offered: a speaker sends End-of-RIB only to a peer that announces it.
	GracefulRestart bool
	// RouterID is the BGP identifier; zero: Local, which must then be IPv4.
	RouterID netip.Addr
}

// Dial connects from Local to Remote, exchanges OPENs (4-octet AS, IPv4 unicast, IPv6 unicast
// if asked, route refresh) and KEEPALIVEs, and returns once the session is Established on our side.
func Dial(ctx context.Context, c Config) (*Session, error) {
	if c.Port == 0 {
		c.Port = 179
	}
	if c.HoldTime == 0 {
		c.HoldTime = 9
	}
	d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(c.Local, 0))}
	conn, err := d.DialContext(ctx, "tcp", netip.AddrPortFrom(c.Remote, c.Port).String())
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", c.Remote, err)
	}
	s := &Session{conn: conn, closed: make(chan struct{})}
	if err := s.write(MsgOpen, openBody(c)); err != nil {
		conn.Close()
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetReadDeadline(dl)
	}
	// OPEN, then KEEPALIVE from the peer: Established.
	for got := 0; got < 2; {
		typ, body, err := ReadMessage(conn)
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("open session with %s: %w", c.Remote, err)
		}
		switch typ {
		case MsgOpen:
			got++
			if err := s.write(MsgKeepalive, nil); err != nil {
				conn.Close()
				return nil, err
			}
		case MsgKeepalive:
			got++
		case MsgNotification:
			conn.Close()
			return nil, fmt.Errorf("open session with %s: %v", c.Remote, parseNotification(body))
		}
	}
	_ = conn.SetReadDeadline(time.Time{})
	go s.readLoop()
	go s.keepalive(time.Duration(c.HoldTime) * time.Second / 3)
	return s, nil
}

func openBody(c Config) []byte {
	as2 := uint16(23456) // AS_TRANS (RFC 6793) when the AS needs 4 octets
	if c.ASN < 65536 {
		as2 = uint16(c.ASN)
	}
	caps := []byte{
		1, 4, 0, 1, 0, 1, // multiprotocol IPv4 unicast
		2, 0, // route refresh
		65, 4, 0, 0, 0, 0, // 4-octet AS
	}
	binary.BigEndian.PutUint32(caps[len(caps)-4:], c.ASN)
	if c.IPv6 {
		caps = append(caps, 1, 4, 0, 2, 0, 1) // multiprotocol IPv6 unicast
	}
	if c.GracefulRestart {
		gr := []byte{64, 6, 0, 120, 0, 1, 1, 0} // restart time 120 s; IPv4 unicast
		if c.IPv6 {
			gr = append(gr, 0, 2, 1, 0)
			gr[1] += 4
		}
		caps = append(caps, gr...)
	}
	if !c.RouterID.IsValid() {
		c.RouterID = c.Local
	}
	rid := c.RouterID.As4()
	b := []byte{4, 0, 0, 0, 0, rid[0], rid[1], rid[2], rid[3], byte(2 + len(caps)), 2, byte(len(caps))}
	binary.BigEndian.PutUint16(b[1:], as2)
	binary.BigEndian.PutUint16(b[3:], c.HoldTime)
	return append(b, caps...)
}

// Frame is a whole message: the marker, the length and the type before body.
func Frame(typ byte, body []byte) []byte {
	msg := make([]byte, 19, 19+len(body))
	for i := range 16 {
		msg[i] = 0xff
	}
	binary.BigEndian.PutUint16(msg[16:], uint16(19+len(body)))
	msg[18] = typ
	return append(msg, body...)
}

func (s *Session) write(typ byte, body []byte) error {
	msg := Frame(typ, body)
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_ = s.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := s.conn.Write(msg); err != nil {
		return fmt.Errorf("send message type %d: %w", typ, err)
	}
	return nil
}

// ReadMessage reads one message and returns its type and body.
func ReadMessage(r io.Reader) (byte, []byte, error) {
	var h [19]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := int(binary.BigEndian.Uint16(h[16:]))
	if n < 19 {
		return 0, nil, fmt.Errorf("BGP message length %d", n)
	}
	body := make([]byte, n-19)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, nil, err
	}
	return h[18], body, nil
}

func parseNotification(body []byte) Notification {
	var n Notification
	if len(body) >= 2 {
		n.Code, n.Subcode = body[0], body[1]
	}
	return n
}

func (s *Session) readLoop() {
	defer close(s.closed)
	for {
		typ, body, err := ReadMessage(s.conn)
		if err != nil {
			s.mu.Lock()
			s.err = err
			s.mu.Unlock()
			return
		}
		switch typ {
		case MsgNotification:
			s.mu.Lock()
			s.notifs = append(s.notifs, parseNotification(body))
			s.mu.Unlock()
		case MsgUpdate:
			u, err := ParseUpdate(body)
			if err != nil {
				u = Received{Err: err}
			}
			s.mu.Lock()
			s.updates = append(s.updates, u)
			s.mu.Unlock()
		}
	}
}

func (s *Session) keepalive(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.closed:
			return
		case <-t.C:
			if s.write(MsgKeepalive, nil) != nil {
				return
			}
		}
	}
}

// SendUpdate sends an UPDATE with the given body (everything after the header), as is.
func (s *Session) SendUpdate(body []byte) error { return s.write(MsgUpdate, body) }

// SendMessage sends a message of any type, defined or not, with the given body.
func (s *Session) SendMessage(typ byte, body []byte) error { return s.write(typ, body) }

// Closed is closed when the peer has ended the connection.
func (s *Session) Closed() <-chan struct{} { return s.closed }

// Notifications returns the NOTIFICATIONs received so far.
func (s *Session) Notifications() []Notification {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Notification(nil), s.notifs...)
}

// Close ends the session without a NOTIFICATION.
func (s *Session) Close() error {
	err := s.conn.Close()
	<-s.closed
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// Attr encodes one path attribute; the length is the value's unless length >= 0 says
// otherwise (a lie), and the extended-length flag picks a two-byte length.
func Attr(flags, typ byte, value []byte, length int) []byte {
	if length < 0 {
		length = len(value)
	}
	var b bytes.Buffer
	b.WriteByte(flags)
	b.WriteByte(typ)
	if flags&FlagExtended != 0 {
		_ = binary.Write(&b, binary.BigEndian, uint16(length))
	} else {
		b.WriteByte(byte(length))
	}
	b.Write(value)
	return b.Bytes()
}

// Origin, ASPath and NextHop are well-formed attributes.
func Origin() []byte { return Attr(FlagTransitive, AttrOrigin, []byte{0}, -1) }

// ASPath is an AS_SEQUENCE of 4-octet ASes.
func ASPath(asns ...uint32) []byte {
	v := []byte{2, byte(len(asns))}
	for _, a := range asns {
		v = binary.BigEndian.AppendUint32(v, a)
	}
	return Attr(FlagTransitive, AttrASPath, v, -1)
}

// NextHop is a NEXT_HOP attribute.
func NextHop(a netip.Addr) []byte {
	b := a.As4()
	return Attr(FlagTransitive, AttrNextHop, b[:], -1)
}

// NLRI encodes prefixes the way UPDATE (IPv4) and MP_REACH/MP_UNREACH_NLRI (IPv6) carry them.
func NLRI(prefixes ...netip.Prefix) []byte {
	var b []byte
	for _, p := range prefixes {
		a := p.Addr().AsSlice()
		b = append(b, byte(p.Bits()))
		b = append(b, a[:(p.Bits()+7)/8]...)
	}
	return b
}

// Update assembles an UPDATE body: withdrawn routes, path attributes, NLRI, with their two
// length fields computed (use UpdateRaw to lie about them).
func Update(withdrawn []byte, attrs [][]byte, nlri []byte) []byte {
	pa := bytes.Join(attrs, nil)
	return UpdateRaw(len(withdrawn), withdrawn, len(pa), pa, nlri)
}

// UpdateRaw is Update with both length fields given.
func UpdateRaw(withdrawnLen int, withdrawn []byte, attrLen int, attrs, nlri []byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(withdrawnLen))
	b = append(b, withdrawn...)
	b = binary.BigEndian.AppendUint16(b, uint16(attrLen))
	b = append(b, attrs...)
	return append(b, nlri...)
}
