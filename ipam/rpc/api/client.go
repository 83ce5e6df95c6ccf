package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"
)

// Client reaches tabby-node's IPAM service over its unix socket: a Service, and the Transport
// under it. Errors wrap the same kinds as the service's (ErrExhausted, ErrUnavailable...), plus
// ErrNoServer when nothing answers the socket. It is safe for concurrent use: each call takes an
// idle connection or opens one.
type Client struct {
	Service
	socket string
	mu     sync.Mutex
	idle   []*clientConn
}

type clientConn struct {
	net.Conn
	r *bufio.Reader
}

// Dial prepares a client for the socket. A socket file that does not exist fails at once with
// ErrNoServer (the common case while tabby-node is down), without a connection attempt; the
// connection is made by the first call.
func Dial(socket string) (*Client, error) {
	if _, err := os.Stat(socket); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoServer, err)
	}
	c := &Client{socket: socket}
	c.Service = Connect(c)
	return c, nil
}

// Close closes the idle connections.
func (c *Client) Close() error {
	c.mu.Lock()
	idle := c.idle
	c.idle = nil
	c.mu.Unlock()
	for _, cc := range idle {
		_ = cc.Close()
	}
	return nil
}

func (c *Client) conn(ctx context.Context) (*clientConn, error) {
	c.mu.Lock()
	if n := len(c.idle); n > 0 {
		cc := c.idle[n-1]
		c.idle = c.idle[:n-1]
		c.mu.Unlock()
		return cc, nil
	}
	c.mu.Unlock()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.socket)
	if err != nil {
		return nil, err
	}
	return &clientConn{Conn: conn, r: bufio.NewReader(conn)}, nil
}

// Invoke sends one request and reads its reply. Anything that goes wrong on the way (refused,
// reset, no reply before the deadline) is ErrNoServer: the caller falls back to the API server,
// and Assign's idempotence makes a call the server did carry out harmless to repeat.
func (c *Client) Invoke(ctx context.Context, method string, req, resp any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("%w: encode %s request: %v", ErrInvalid, method, err)
	}
	deadline, _ := ctx.Deadline()
	line, err := json.Marshal(Request{Method: method, Deadline: deadline, Body: body})
	if err != nil {
		return fmt.Errorf("%w: encode %s request: %v", ErrInvalid, method, err)
	}
	cc, err := c.conn(ctx)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNoServer, err)
	}
	_ = cc.SetDeadline(deadline)
	// A context cancelled before its deadline ends the call too.
	stop := context.AfterFunc(ctx, func() { _ = cc.SetDeadline(time.Unix(1, 0)) })
	raw, err := func() ([]byte, error) {
		defer stop()
		if _, err := cc.Write(append(line, '\n')); err != nil {
			return nil, fmt.Errorf("send: %w", err)
		}
		raw, err := cc.r.ReadBytes('\n')
		if err != nil {
			return nil, fmt.Errorf("no reply: %w", err)
		}
		return raw, nil
	}()
	var r Reply
	if err == nil {
		if uerr := json.Unmarshal(raw, &r); uerr != nil {
			err = fmt.Errorf("unreadable reply: %w", uerr)
		}
	}
	if err != nil {
		_ = cc.Close()
		cerr := ctx.Err()
		if cerr == nil && errors.Is(err, os.ErrDeadlineExceeded) {
			cerr = context.DeadlineExceeded // the socket's deadline is the context's
		}
		if cerr != nil {
			return fmt.Errorf("%w: %s: %v (%w)", ErrNoServer, method, err, cerr)
		}
		return fmt.Errorf("%w: %s: %v", ErrNoServer, method, err)
	}
	c.mu.Lock()
	c.idle = append(c.idle, cc)
	c.mu.Unlock()
	return r.Decode(resp)
}

// IsNoServer tells whether err means "nobody answered the socket" (fall back to the direct path).
func IsNoServer(err error) bool { return errors.Is(err, ErrNoServer) }
