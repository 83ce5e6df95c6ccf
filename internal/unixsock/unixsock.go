// Package unixsock opens tabby-node's local unix sockets (the IPAM service, the BGP status
// service).
package unixsock

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
)

// Listen opens a unix socket at path, replacing a stale one left by a previous run, readable and
// writable by root only (the socket grants control over the node's addresses and sessions).
func Listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("create socket directory: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("chmod %s: %w", path, err)
	}
	return l, nil
}
