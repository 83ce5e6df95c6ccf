package ui

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Listen opens addr (host:port; port 0 picks one) for Serve.
func Listen(addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("web view: listen on %s: %w", addr, err)
	}
	return l, nil
}

// URL is the page's address on l.
func URL(l net.Listener) string { return "http://" + l.Addr().String() + "/" }

// Loopback tells whether l only takes connections from this machine. Anyone who reaches the
// page reads the cluster's flows with the credentials of whoever serves it.
func Loopback(l net.Listener) bool {
	a, ok := l.Addr().(*net.TCPAddr)
	return ok && a.IP.IsLoopback()
}

// Serve serves the web view of b on l until ctx is done. Open flow streams end with ctx.
func Serve(ctx context.Context, l net.Listener, b Backend, o Options) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	srv := &http.Server{
		Handler:           NewHandler(b, o),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			_ = srv.Close() // streams that outlived the grace period
		}
	}()
	err := srv.Serve(l)
	cancel()
	<-done
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("web view: %w", err)
}
