// Command felix benchmarks tabby's felix against `ip -batch` in fresh network namespaces:
// full sync of 10,000 workload /32s over 100 veths plus 2,000 remote /26s, the latency from a
// new workload to its route in the kernel, and a no-op resync of 12,000 routes. Run as root.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/felix"
	"github.com/tabbynet/tabby/hack/bench/benchutil"
)

const (
	veths     = 100
	workloads = 10000
	remotes   = 2000
	rounds    = 3
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench felix:", err)
		os.Exit(1)
	}
}

type benchNS struct {
	ns.NetNS
	h *netlink.Handle
}

func newNS() (*benchNS, error) {
	n, err := testutils.NewNS()
	if err != nil {
		return nil, err
	}
	nsh, err := netns.GetFromPath(n.Path())
	if err != nil {
		return nil, err
	}
	defer nsh.Close()
	h, err := netlink.NewHandleAt(nsh)
	if err != nil {
		return nil, err
	}
	b := &benchNS{NetNS: n, h: h}
	for i := 0; i < veths; i++ {
		if err := b.veth(vethName(i), fmt.Sprintf("p%d", i), ""); err != nil {
			b.close()
			return nil, err
		}
	}
	if err := b.veth("up0", "up0p", "198.51.100.11/24"); err != nil {
		b.close()
		return nil, err
	}
	return b, nil
}

func (b *benchNS) veth(name, peer, addr string) error {
	if err := b.h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: peer}); err != nil {
		return fmt.Errorf("veth %s: %w", name, err)
	}
	for _, n := range []string{name, peer} {
		l, err := b.h.LinkByName(n)
		if err != nil {
			return err
		}
		if n == name && addr != "" {
			a, _ := netlink.ParseAddr(addr)
			if err := b.h.AddrAdd(l, a); err != nil {
				return err
			}
		}
		if err := b.h.LinkSetUp(l); err != nil {
			return err
		}
	}
	return nil
}

func (b *benchNS) close() {
	b.h.Close()
	b.NetNS.Close()
	_ = testutils.UnmountNS(b.NetNS)
}

func (b *benchNS) name() string { return filepath.Base(b.Path()) }

func (b *benchNS) flush() error {
	out, err := exec.Command("ip", "-n", b.name(), "route", "flush", "proto", fmt.Sprint(v1.RouteProtocol)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("flush: %v: %s", err, out)
	}
	return nil
}

func (b *benchNS) count() int {
	rs, _ := b.h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Protocol: v1.RouteProtocol}, netlink.RT_FILTER_PROTOCOL)
	return len(rs)
}

func vethName(i int) string { return fmt.Sprintf("cali%011d", i) }

func workloadIP(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), byte(i)}) }

func remotePrefix(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(250 + i>>10), byte(i >> 2), byte(i&3) << 6}), 26)
}

func run() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("needs root (network namespaces)")
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	ipNS, err := newNS()
	if err != nil {
		return err
	}
	defer ipNS.close()
	fNS, err := newNS()
	if err != nil {
		return err
	}
	defer fNS.close()

	// ip -batch: the reference.
	var script strings.Builder
	for i := 0; i < workloads; i++ {
		fmt.Fprintf(&script, "route add %s/32 dev %s scope link proto %d\n", workloadIP(i), vethName(i%veths), v1.RouteProtocol)
	}
	for i := 0; i < remotes; i++ {
		fmt.Fprintf(&script, "route add %s via 198.51.100.12 dev up0 proto %d\n", remotePrefix(i), v1.RouteProtocol)
	}
	batchFile := filepath.Join(os.TempDir(), fmt.Sprintf("tabby-bench-felix-%d.batch", os.Getpid()))
	if err := os.WriteFile(batchFile, []byte(script.String()), 0o600); err != nil {
		return err
	}
	defer os.Remove(batchFile)
	var ipTimes, felixTimes, noopTimes []time.Duration
	for r := 0; r < rounds; r++ {
		if err := ipNS.flush(); err != nil {
			return err
		}
		start := time.Now()
		if out, err := exec.Command("ip", "-n", ipNS.name(), "-batch", batchFile).CombinedOutput(); err != nil {
			return fmt.Errorf("ip -batch: %v: %s", err, out)
		}
		ipTimes = append(ipTimes, time.Since(start))
	}
	if n := ipNS.count(); n != workloads+remotes {
		return fmt.Errorf("ip -batch made %d routes, want %d", n, workloads+remotes)
	}

	wl := make([]felix.Workload, workloads)
	for i := range wl {
		wl[i] = felix.Workload{IP: workloadIP(i), Interface: vethName(i % veths)}
	}
	newFelix := func() (*felix.Felix, error) {
		f, err := felix.New(felix.Config{NodeName: "bench", UplinkInterface: "up0", NetNSPath: fNS.Path(), ResyncInterval: time.Hour})
		if err != nil {
			return nil, err
		}
		f.SetLocalNode(netip.MustParsePrefix("198.51.100.11/24"), netip.Addr{})
		f.SetPools([]felix.Pool{
			{Name: "pods", CIDR: netip.MustParsePrefix("10.244.0.0/16"), IPIPMode: v1.IPIPModeNever},
			{Name: "remote", CIDR: netip.MustParsePrefix("10.250.0.0/15"), IPIPMode: v1.IPIPModeNever},
		})
		f.SetWorkloads(wl)
		for i := 0; i < remotes; i++ {
			f.UpsertBGPRoute(felix.BGPRoute{Prefix: remotePrefix(i), NextHop: netip.MustParseAddr("198.51.100.12")})
		}
		return f, nil
	}
	ctx := context.Background()
	var f *felix.Felix
	for r := 0; r < rounds; r++ {
		if f != nil {
			f.Close()
		}
		if err := fNS.flush(); err != nil {
			return err
		}
		if f, err = newFelix(); err != nil {
			return err
		}
		start := time.Now()
		if err := f.ApplyNow(ctx); err != nil {
			return fmt.Errorf("felix full sync: %w", err)
		}
		felixTimes = append(felixTimes, time.Since(start))
	}
	defer f.Close()
	if n := fNS.count(); n != workloads+remotes {
		return fmt.Errorf("felix made %d routes, want %d", n, workloads+remotes)
	}
	for r := 0; r < 10; r++ {
		f.QueueResync()
		start := time.Now()
		if err := f.ApplyNow(ctx); err != nil {
			return fmt.Errorf("felix resync: %w", err)
		}
		noopTimes = append(noopTimes, time.Since(start))
	}

	lat, err := singleRouteLatency(ctx, f, fNS, wl)
	if err != nil {
		return err
	}

	ipMed, fMed := median(ipTimes), median(felixTimes)
	fmt.Printf("felix benchmark (%d workload /32 over %d veths + %d remote /26 via uplink; median of %d)\n", workloads, veths, remotes, rounds)
	fmt.Printf("%-44s %12s %12s %8s %s\n", "measure", "tabby", "reference", "ratio", "target")
	fmt.Printf("%-44s %12s %12s %7.2fx %s\n", "full sync 12,000 routes (felix vs ip -batch)", ms(fMed), ms(ipMed), float64(fMed)/float64(ipMed), "<= 1.5x")
	fmt.Printf("%-44s %12s %12s %8s %s\n", "new workload -> route in kernel p50", ms(benchutil.Pct(lat, 50)), "-", "", "")
	fmt.Printf("%-44s %12s %12s %8s %s\n", "new workload -> route in kernel p99", ms(benchutil.Pct(lat, 99)), "-", "", "< 10 ms")
	fmt.Printf("%-44s %12s %12s %8s %s\n", "no-op resync of 12,000 routes (median)", ms(median(noopTimes)), "-", "", "< 100 ms")
	return nil
}

// singleRouteLatency runs felix's loop and measures SetWorkloads(one more) to the route's
// RTM_NEWROUTE event in the namespace.
func singleRouteLatency(ctx context.Context, f *felix.Felix, b *benchNS, wl []felix.Workload) ([]time.Duration, error) {
	nsh, err := netns.GetFromPath(b.Path())
	if err != nil {
		return nil, err
	}
	defer nsh.Close()
	events := make(chan netlink.RouteUpdate, 4096)
	done := make(chan struct{})
	defer close(done)
	if err := netlink.RouteSubscribeWithOptions(events, done, netlink.RouteSubscribeOptions{Namespace: &nsh}); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	loopDone := make(chan error, 1)
	go func() { loopDone <- f.Run(ctx) }()
	defer func() { cancel(); <-loopDone }()
	time.Sleep(200 * time.Millisecond) // let the loop's first resync settle
	drain(events)

	// TABBY_BENCH_CPUPROFILE=FILE profiles this phase (where a single new route's time goes).
	if path := os.Getenv("TABBY_BENCH_CPUPROFILE"); path != "" {
		pf, err := os.Create(path)
		if err != nil {
			return nil, err
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return nil, err
		}
		defer pprof.StopCPUProfile()
	}
	var lat []time.Duration
	cur := slices.Clone(wl)
	for i := 0; i < 100; i++ {
		ip := netip.AddrFrom4([4]byte{10, 244, 200, byte(i)})
		cur = append(cur, felix.Workload{IP: ip, Interface: vethName(i % veths)})
		want := netip.PrefixFrom(ip, 32).String()
		start := time.Now()
		f.SetWorkloads(cur)
		timeout := time.After(2 * time.Second)
	wait:
		for {
			select {
			case u := <-events:
				if u.Type == 24 /* RTM_NEWROUTE */ && u.Dst != nil && u.Dst.String() == want {
					lat = append(lat, time.Since(start))
					break wait
				}
			case <-timeout:
				return nil, fmt.Errorf("route %s not programmed within 2s", want)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return lat, nil
}

func drain(ch chan netlink.RouteUpdate) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

func median(d []time.Duration) time.Duration { return benchutil.Pct(d, 50) }

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }
