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
// plugins' unit tests can run without an API server; tabby-ipam uses rpc.OpenLocal, tabby
// ExecOpener.
type DirectOpener func(ctx context.Context, kubeconfig string, strictAffinity bool) (api.Service, error)

// Options choose the paths.
type Options struct {
	Socket         string // "" or "none": no socket path
	Kubeconfig     string
	StrictAffinity bool
	Direct         DirectOpener // nil: the direct path is unavailable
	Log            *slog.Logger
}

// Conn is the plugins' Service: every method tries the socket first and falls back once, for
// the rest of the invocation, when nothing answers there. Calls are made one at a time.
type Conn struct {
	api.Service
	opts   Options
	sock   *api.Client
	direct api.Transport
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
	c.Service = api.Connect(c)
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

// Invoke is the fallback, under every method of the Conn's Service.
func (c *Conn) Invoke(ctx context.Context, method string, req, resp any) error {
	if c.sock != nil {
		err := c.sock.Invoke(ctx, method, req, resp)
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
		c.direct = api.InProcess(d)
	}
	c.Path = "direct"
	return c.direct.Invoke(ctx, method, req, resp)
}
