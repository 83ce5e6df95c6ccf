// Package netnsrun runs a function on an OS thread inside a network namespace. /proc/sys/net
// and the iptables/ipset commands act on the namespace of the calling thread, so felix bound
// to a test namespace must make those calls through here.
package netnsrun

import (
	"fmt"

	"github.com/containernetworking/plugins/pkg/ns"
)

// Runner runs fn in felix's network namespace.
type Runner func(fn func() error) error

// Current runs fn directly: felix in the host namespace (tabby-node) needs no switching.
func Current(fn func() error) error { return fn() }

// At returns a Runner for the namespace at path; the returned close releases it.
func At(path string) (Runner, func() error, error) {
	n, err := ns.GetNS(path)
	if err != nil {
		return nil, nil, fmt.Errorf("open netns %s: %w", path, err)
	}
	run := func(fn func() error) error {
		return n.Do(func(ns.NetNS) error { return fn() })
	}
	return run, n.Close, nil
}
