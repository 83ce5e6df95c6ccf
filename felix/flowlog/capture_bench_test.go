package flowlog

import (
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/tabbynet/tabby/felix/internal/nstest"
)

// BenchmarkCaptureConnections is what a new connection costs with each part of the capture
// running in the namespace that receives it (a logged SYN, conntrack accounting on): nothing,
// the NFLOG reader alone, the conntrack DESTROY subscription alone, the whole capture. One
// op is a TCP connection opened and reset from another namespace.
func BenchmarkCaptureConnections(b *testing.B) {
	cli, srv := nstest.New(b), nstest.New(b)
	cli.Exec(b, "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", srv.Path())
	cli.Exec(b, "ip", "addr", "add", "10.244.0.1/24", "dev", "eth0")
	cli.Exec(b, "ip", "link", "set", "eth0", "up")
	srv.Exec(b, "ip", "addr", "add", "10.244.0.2/24", "dev", "eth0")
	srv.Exec(b, "ip", "link", "set", "eth0", "up")
	srv.Exec(b, "iptables", "-A", "INPUT", "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT")
	srv.Exec(b, "iptables", "-A", "INPUT", "-p", "tcp", "--dport", "80", "-j", "NFLOG", "--nflog-prefix", "tabby-x", "--nflog-group", "40", "--nflog-threshold", "32")
	srv.Exec(b, "sysctl", "-qw", "net.netfilter.nf_conntrack_acct=1")
	var ln net.Listener
	if err := srv.Enter(func() (err error) { ln, err = net.Listen("tcp", "10.244.0.2:80"); return err }); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	for _, m := range []struct {
		name  string
		start func(b *testing.B) func()
	}{
		{"off", func(*testing.B) func() { return func() {} }},
		{"nflog", func(b *testing.B) func() {
			var r *nflogReader
			if err := srv.Enter(func() (err error) { r, err = openNFLOG(); return err }); err != nil {
				b.Fatal(err)
			}
			go func() {
				for {
					if _, err := r.read(); err != nil {
						return
					}
				}
			}()
			return func() { _ = r.close() }
		}},
		{"conntrack", func(b *testing.B) func() {
			var r *ctReader
			if err := srv.Enter(func() (err error) { r, err = openConntrack(); return err }); err != nil {
				b.Fatal(err)
			}
			done := make(chan struct{})
			go func() {
				for {
					select {
					case <-r.events:
					case <-r.errs:
					case <-done:
						return
					}
				}
			}()
			return func() { _ = r.close(); close(done) }
		}},
		{"capture", func(b *testing.B) func() {
			agg := NewAggregator("n", 10000, Counters{})
			c, err := StartCapture(Opener(srv.Enter), NewJoiner(agg, fakeResolver{}, 100000, Counters{}), agg, time.Second, slog.Default())
			if err != nil {
				b.Fatal(err)
			}
			return c.Stop
		}},
	} {
		b.Run(m.name, func(b *testing.B) {
			stop := m.start(b)
			defer stop()
			err := cli.Enter(func() error {
				d := net.Dialer{Timeout: time.Second}
				b.ResetTimer()
				for range b.N {
					c, err := d.Dial("tcp", "10.244.0.2:80")
					if err != nil {
						return err
					}
					_ = c.(*net.TCPConn).SetLinger(0)
					_ = c.Close()
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		})
	}
}
