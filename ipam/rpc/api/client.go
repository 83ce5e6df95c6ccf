package api

import (
	"context"
	"errors"
	"fmt"
	"os"

	"google.golang.org/grpc"

	"github.com/tabbynet/tabby/internal/grpcjson"
)

// Client reaches tabby-node's IPAM service over its unix socket. Errors wrap the same kinds as
// Local's (ErrExhausted, ErrUnavailable...), plus ErrNoServer when nothing answers the socket.
type Client struct {
	conn *grpc.ClientConn
}

// Dial prepares a client for the socket. A socket file that does not exist fails at once with
// ErrNoServer (the common case while tabby-node is down), without a connection attempt.
func Dial(socket string) (*Client, error) {
	if _, err := os.Stat(socket); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoServer, err)
	}
	conn, err := grpcjson.Dial(socket)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoServer, err)
	}
	return &Client{conn: conn}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

func (c *Client) call(ctx context.Context, method string, req, resp any) error {
	return FromStatus(c.conn.Invoke(ctx, "/"+ServiceName+"/"+method, req, resp))
}

func (c *Client) Assign(ctx context.Context, r *AssignRequest) (*AssignReply, error) {
	out := new(AssignReply)
	return out, c.call(ctx, "Assign", r, out)
}

func (c *Client) Release(ctx context.Context, r *ReleaseRequest) (*ReleaseReply, error) {
	out := new(ReleaseReply)
	return out, c.call(ctx, "Release", r, out)
}

func (c *Client) Lookup(ctx context.Context, r *LookupRequest) (*LookupReply, error) {
	out := new(LookupReply)
	return out, c.call(ctx, "Lookup", r, out)
}

func (c *Client) Ready(ctx context.Context, r *ReadyRequest) (*ReadyReply, error) {
	out := new(ReadyReply)
	return out, c.call(ctx, "Ready", r, out)
}

func (c *Client) GC(ctx context.Context, r *GCRequest) (*GCReply, error) {
	out := new(GCReply)
	return out, c.call(ctx, "GC", r, out)
}

// IsNoServer tells whether err means "nobody answered the socket" (fall back to Local).
func IsNoServer(err error) bool { return errors.Is(err, ErrNoServer) }
