// Package sysctl writes the kernel settings felix needs, under /proc/sys of felix's network
// namespace.
package sysctl

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tabbynet/tabby/felix/netnsrun"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// Setting is one key (dotted, as sysctl(8) names it) and its value.
type Setting struct{ Key, Value string }

// Writer writes settings inside a namespace.
type Writer struct {
	Run  netnsrun.Runner
	Root string // "/proc/sys" unless a test says otherwise
}

// NewWriter writes through run.
func NewWriter(run netnsrun.Runner) *Writer {
	if run == nil {
		run = netnsrun.Current
	}
	return &Writer{Run: run, Root: "/proc/sys"}
}

// path turns net.ipv4.conf.cali1.forwarding into net/ipv4/conf/cali1/forwarding; interface names
// carry no dots in tabby (cali + hex, tunl0), so the dotted form is unambiguous.
func (w *Writer) path(key string) string {
	return filepath.Join(w.Root, strings.ReplaceAll(key, ".", "/"))
}

// Set writes each setting whose value differs, all in one namespace switch.
func (w *Writer) Set(settings ...Setting) error {
	return w.Run(func() error {
		for _, s := range settings {
			p := w.path(s.Key)
			cur, err := os.ReadFile(p)
			if err == nil && string(bytes.TrimSpace(cur)) == s.Value {
				continue
			}
			if err := os.WriteFile(p, []byte(s.Value), 0o644); err != nil {
				return fmt.Errorf("sysctl %s=%s: %w", s.Key, s.Value, err)
			}
		}
		return nil
	})
}

// Get reads one setting.
func (w *Writer) Get(key string) (string, error) {
	var v string
	err := w.Run(func() error {
		b, err := os.ReadFile(w.path(key))
		if err != nil {
			return fmt.Errorf("sysctl %s: %w", key, err)
		}
		v = string(bytes.TrimSpace(b))
		return nil
	})
	return v, err
}

// Forwarding is what a node routing a family's pod traffic needs.
func Forwarding(f ipfamily.Family) []Setting {
	if f == ipfamily.IPv6 {
		return []Setting{{"net.ipv6.conf.all.forwarding", "1"}}
	}
	return []Setting{{"net.ipv4.ip_forward", "1"}}
}

// ConntrackAccounting makes conntrack count each connection's packets and bytes, which flow
// logs read when it ends. The setting is the network namespace's own.
func ConntrackAccounting() []Setting {
	return []Setting{{"net.netfilter.nf_conntrack_acct", "1"}}
}

// WorkloadInterface is what a cali veth needs: the pod's default gateway (169.254.1.1, an address
// nobody has) is answered by proxy ARP at once, and the host forwards for it.
func WorkloadInterface(ifname string) []Setting {
	return []Setting{
		{"net.ipv4.conf." + ifname + ".proxy_arp", "1"},
		{"net.ipv4.neigh." + ifname + ".proxy_delay", "0"},
		{"net.ipv4.conf." + ifname + ".forwarding", "1"},
	}
}

// TunnelInterface is what tunl0 needs: IPIP packets arrive from other nodes' addresses that
// strict reverse-path filtering would drop.
func TunnelInterface(ifname string) []Setting {
	return []Setting{{"net.ipv4.conf." + ifname + ".rp_filter", "2"}}
}
