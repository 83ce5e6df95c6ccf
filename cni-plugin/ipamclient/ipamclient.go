// Package ipamclient gives the CNI plugins one IPAM Service: tabby-node's unix socket when it
// answers, else an allocator in the plugin's own process talking to the API server with the
// configured kubeconfig (slower: cold caches and a new connection per invocation, but pods still
// start while tabby-node restarts).
package ipamclient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/tabbynet/tabby/ipam/rpc/api"
)

// DirectOpener builds the in-process Service from a kubeconfig path. It is a variable so the
// plugins' unit tests can run without an API server; the binaries use api.OpenLocal.
type DirectOpener func(ctx context.Context, kubeconfig string, strictAffinity bool) (api.Service, error)

// Options choose the paths.
type Options struct {
	Socket         string // "" or "none": no socket path
	Kubeconfig     string
	StrictAffinity bool
	Direct         DirectOpener // nil: the direct path is unavailable
	Log            *slog.Logger
}

// Conn is a Service that tries the socket first and falls back once, for the rest of the
// invocation, when nothing answers there.
type Conn struct {
	opts   Options
	sock   *api.Client
	direct api.Service
	// Path says which path served the last call: "socket" or "direct" (logged, and asserted by
	// tests).
	Path string
}

// Open prepares a Conn; nothing is dialled yet.
func Open(opts Options) *Conn {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	c := &Conn{opts: opts}
	if opts.Socket != "" && opts.Socket != "none" {
		if s, err := api.Dial(opts.Socket); err == nil {
			c.sock = s
		} else {
			opts.Log.Debug("tabby-node IPAM socket not usable, using the API server directly", "socket", opts.Socket, "err", err)
		}
	}
	return c
}

// Close releases the socket connection.
func (c *Conn) Close() error {
	if c.sock != nil {
		return c.sock.Close()
	}
	return nil
}

func (c *Conn) do(ctx context.Context, call func(api.Service) error) error {
	if c.sock != nil {
		err := call(c.sock)
		if !api.IsNoServer(err) {
			c.Path = "socket"
			return err
		}
		c.opts.Log.Info("tabby-node IPAM service did not answer, using the API server directly", "socket", c.opts.Socket, "err", err)
		c.sock.Close()
		c.sock = nil
	}
	if c.direct == nil {
		if c.opts.Direct == nil {
			return fmt.Errorf("%w: no tabby-node at %q and no direct path configured", api.ErrUnavailable, c.opts.Socket)
		}
		d, err := c.opts.Direct(ctx, c.opts.Kubeconfig, c.opts.StrictAffinity)
		if err != nil {
			if errors.Is(err, api.ErrUnavailable) || errors.Is(err, api.ErrInvalid) {
				return err
			}
			return fmt.Errorf("%w: kubeconfig %q: %v", api.ErrUnavailable, c.opts.Kubeconfig, err)
		}
		c.direct = d
	}
	c.Path = "direct"
	return call(c.direct)
}

func (c *Conn) Assign(ctx context.Context, r *api.AssignRequest) (out *api.AssignReply, err error) {
	err = c.do(ctx, func(s api.Service) (e error) { out, e = s.Assign(ctx, r); return })
	return out, err
}

func (c *Conn) Release(ctx context.Context, r *api.ReleaseRequest) (out *api.ReleaseReply, err error) {
	err = c.do(ctx, func(s api.Service) (e error) { out, e = s.Release(ctx, r); return })
	return out, err
}

func (c *Conn) Lookup(ctx context.Context, r *api.LookupRequest) (out *api.LookupReply, err error) {
	err = c.do(ctx, func(s api.Service) (e error) { out, e = s.Lookup(ctx, r); return })
	return out, err
}

func (c *Conn) Ready(ctx context.Context, r *api.ReadyRequest) (out *api.ReadyReply, err error) {
	err = c.do(ctx, func(s api.Service) (e error) { out, e = s.Ready(ctx, r); return })
	return out, err
}

func (c *Conn) GC(ctx context.Context, r *api.GCRequest) (out *api.GCReply, err error) {
	err = c.do(ctx, func(s api.Service) (e error) { out, e = s.GC(ctx, r); return })
	return out, err
}

var _ api.Service = (*Conn)(nil)
