// Command felix benchmarks tabby's felix against `ip -batch` in fresh network namespaces:
// full sync of 10,000 workload /32s over 100 veths plus 2,000 remote /26s, the same for VXLAN
// (a device, 1,000 VTEPs' neighbour and FDB entries, 12,000 routes via them, against `ip -batch`
// and `bridge -batch`), the latency from a new workload to its route in the kernel, and a no-op
// resync of 12,000 routes. Run as root.
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
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/felix"
	"github.com/tabbynet/tabby/hack/bench/benchutil"
)

const (
	veths     = 100
	newPods   = 100 // each on a veth of its own, made beside the full sync's
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

func newNS() (*benchNS, error) { return newNSWith(veths + newPods) }

// newNSWith is a namespace with up0 (both families' node addresses) and n cali veths.
func newNSWith(n int) (*benchNS, error) {
	netNS, err := testutils.NewNS()
	if err != nil {
		return nil, err
	}
	nsh, err := netns.GetFromPath(netNS.Path())
	if err != nil {
		return nil, err
	}
	defer nsh.Close()
	h, err := netlink.NewHandleAt(nsh)
	if err != nil {
		return nil, err
	}
	b := &benchNS{NetNS: netNS, h: h}
	for i := 0; i < n; i++ {
		if err := b.veth(vethName(i), fmt.Sprintf("p%d", i), ""); err != nil {
			b.close()
			return nil, err
		}
	}
	if err := b.veth("up0", "up0p", "198.51.100.11/24"); err != nil {
		b.close()
		return nil, err
	}
	up0, err := h.LinkByName("up0")
	if err == nil {
		err = h.AddrAdd(up0, &netlink.Addr{IPNet: ipv6Routes.uplink, Flags: unix.IFA_F_NODAD})
	}
	if err != nil {
		b.close()
		return nil, fmt.Errorf("IPv6 address on up0: %w", err)
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
	out, err := exec.Command("ip", "-n", b.name(), "-4", "route", "flush", "proto", fmt.Sprint(v1.RouteProtocol)).CombinedOutput()
	if err == nil {
		out, err = exec.Command("ip", "-n", b.name(), "-6", "route", "flush", "proto", fmt.Sprint(v1.RouteProtocol)).CombinedOutput()
	}
	if err != nil {
		return fmt.Errorf("flush: %v: %s", err, out)
	}
	return nil
}

func (b *benchNS) count() int {
	rs, _ := b.h.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Protocol: v1.RouteProtocol}, netlink.RT_FILTER_PROTOCOL)
	return len(rs)
}

func vethName(i int) string { return fmt.Sprintf("cali%011d", i) }

func run() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("needs root (network namespaces)")
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()
	v4, err := fullSync(ctx, ipv4Routes, true)
	if err != nil {
		return err
	}
	defer v4.close()
	v6, err := fullSync(ctx, ipv6Routes, false)
	if err != nil {
		return err
	}
	vxIP, vxFelix, err := vxlanFullSync(ctx)
	if err != nil {
		return err
	}
	f, fNS, ipTimes, felixTimes := v4.f, v4.fNS, v4.ipTimes, v4.felixTimes
	var noopTimes []time.Duration
	for r := 0; r < 10; r++ {
		f.QueueResync()
		start := time.Now()
		if err := f.ApplyNow(ctx); err != nil {
			return fmt.Errorf("felix resync: %w", err)
		}
		noopTimes = append(noopTimes, time.Since(start))
	}

	lat, learned, withdrawn, err := singleRouteLatency(ctx, f, fNS, ipv4Routes)
	if err != nil {
		return err
	}

	ipMed, fMed := median(ipTimes), median(felixTimes)
	fmt.Printf("felix benchmark (%d workload host routes over %d veths + %d remote blocks via uplink, per family; median of %d)\n", workloads, veths, remotes, rounds)
	fmt.Printf("%-44s %12s %12s %8s %s\n", "measure", "tabby", "reference", "ratio", "target")
	fmt.Printf("%-44s %12s %12s %7.2fx %s\n", "full sync 12,000 routes (felix vs ip -batch)", ms(fMed), ms(ipMed), float64(fMed)/float64(ipMed), "<= 1.5x")
	fMed6, ipMed6 := median(v6.felixTimes), median(v6.ipTimes)
	fmt.Printf("%-44s %12s %12s %7.2fx %s\n", "IPv6 full sync 12,000 (vs ip -6 -batch)", ms(fMed6), ms(ipMed6), float64(fMed6)/float64(ipMed6), "<= 1.5x")
	fMedVX, ipMedVX := median(vxFelix), median(vxIP)
	fmt.Printf("%-44s %12s %12s %7.2fx %s\n", "VXLAN full sync 1,000 VTEPs, 12,000 routes", ms(fMedVX), ms(ipMedVX), float64(fMedVX)/float64(ipMedVX), "<= 1.5x")
	fmt.Printf("%-44s %12s %12s %8s %s\n", "new workload -> route in kernel p50", ms(benchutil.Pct(lat, 50)), "-", "", "")
	fmt.Printf("%-44s %12s %12s %8s %s\n", "new workload -> route in kernel p99", ms(benchutil.Pct(lat, 99)), "-", "", "< 10 ms")
	fmt.Printf("%-44s %12s %12s %8s %s\n", "BGP route learned -> in kernel p50, p99", ms(benchutil.Pct(learned, 50))+", "+ms(benchutil.Pct(learned, 99)), "-", "", "p99 < 10 ms")
	fmt.Printf("%-44s %12s %12s %8s %s\n", "BGP route withdrawn -> gone p50, p99", ms(benchutil.Pct(withdrawn, 50))+", "+ms(benchutil.Pct(withdrawn, 99)), "-", "", "p99 < 10 ms")
	fmt.Printf("%-44s %12s %12s %8s %s\n", "no-op resync of 12,000 routes (median)", ms(median(noopTimes)), "-", "", "< 100 ms")
	return nil
}

// singleRouteLatency runs felix's loop and measures, with thousands of routes in place, one
// more workload (a WorkloadUpdate) to its route's RTM_NEWROUTE, and one BGP route learned and
// then withdrawn (RouteUpdate, RouteRemove) to its RTM_NEWROUTE and RTM_DELROUTE, in the
// namespace.
func singleRouteLatency(ctx context.Context, f *felix.Felix, b *benchNS, rs routeSet) (work, learned, withdrawn []time.Duration, err error) {
	nsh, err := netns.GetFromPath(b.Path())
	if err != nil {
		return nil, nil, nil, err
	}
	defer nsh.Close()
	events := make(chan netlink.RouteUpdate, 4096)
	done := make(chan struct{})
	defer close(done)
	if err := netlink.RouteSubscribeWithOptions(events, done, netlink.RouteSubscribeOptions{Namespace: &nsh}); err != nil {
		return nil, nil, nil, err
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
			return nil, nil, nil, err
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return nil, nil, nil, err
		}
		defer pprof.StopCPUProfile()
	}
	// one makes a change and waits for the event of type typ on want.
	one := func(want netip.Prefix, typ uint16, change func()) (time.Duration, error) {
		start := time.Now()
		change()
		timeout := time.After(2 * time.Second)
		for {
			select {
			case u := <-events:
				if u.Type == typ && u.Dst != nil && u.Dst.String() == want.String() {
					d := time.Since(start)
					time.Sleep(5 * time.Millisecond) // felix's loop idle again before the next
					return d, nil
				}
			case <-timeout:
				return 0, fmt.Errorf("route %s: no event %d within 2s", want, typ)
			}
		}
	}
	for i := 0; i < newPods; i++ {
		ip := netip.AddrFrom4([4]byte{10, 244, 200, byte(i)})
		w := model.Workload{Pod: model.PodKey{Namespace: "bench", Name: fmt.Sprint("new-", i)}, Interface: vethName(veths + i), IPs: []netip.Addr{ip}}
		d, err := one(netip.PrefixFrom(ip, 32), unix.RTM_NEWROUTE, func() { f.OnUpdate(model.WorkloadUpdate{Workload: w}) })
		if err != nil {
			return nil, nil, nil, err
		}
		work = append(work, d)
	}
	for _, withdraw := range []bool{false, true} {
		for i := remotes; i < remotes+40; i++ {
			p := rs.remotePrefix(i)
			change, typ := func() { f.OnUpdate(model.RouteUpdate{Prefix: p, NextHop: rs.nextHop}) }, uint16(unix.RTM_NEWROUTE)
			if withdraw {
				change, typ = func() { f.OnUpdate(model.RouteRemove{Prefix: p}) }, unix.RTM_DELROUTE
			}
			d, err := one(p, typ, change)
			if err != nil {
				return nil, nil, nil, err
			}
			if withdraw {
				withdrawn = append(withdrawn, d)
			} else {
				learned = append(learned, d)
			}
		}
	}
	return work, learned, withdrawn, nil
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
