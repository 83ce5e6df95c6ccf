package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/felix"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// routeSet is one family's 12,000 routes: workload host routes over the veths and remote
// blocks via a same-subnet next hop on up0.
type routeSet struct {
	name         string
	ipFlag       string // ip's family switch
	uplink       *net.IPNet
	nodeAddr     netip.Prefix
	nextHop      netip.Addr
	pools        []model.Pool
	workloadIP   func(i int) netip.Addr
	remotePrefix func(i int) netip.Prefix
}

var ipv4Routes = routeSet{
	name: "IPv4", ipFlag: "-4",
	nodeAddr: netip.MustParsePrefix("198.51.100.11/24"), nextHop: netip.MustParseAddr("198.51.100.12"),
	pools: []model.Pool{
		{Name: "pods", CIDR: netip.MustParsePrefix("10.244.0.0/16"), IPIPMode: v1.IPIPModeNever},
		{Name: "remote", CIDR: netip.MustParsePrefix("10.250.0.0/15"), IPIPMode: v1.IPIPModeNever},
	},
	workloadIP: func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), byte(i)}) },
	remotePrefix: func(i int) netip.Prefix {
		return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(250 + i>>10), byte(i >> 2), byte(i&3) << 6}), 26)
	},
}

var ipv6Routes = routeSet{
	name: "IPv6", ipFlag: "-6",
	uplink:   &net.IPNet{IP: net.ParseIP("2001:db8:100::11"), Mask: net.CIDRMask(64, 128)},
	nodeAddr: netip.MustParsePrefix("2001:db8:100::11/64"), nextHop: netip.MustParseAddr("2001:db8:100::12"),
	pools: []model.Pool{
		{Name: "pods6", CIDR: netip.MustParsePrefix("fd00:10:244::/64")},
		{Name: "remote6", CIDR: netip.MustParsePrefix("fd00:10:250::/64")},
	},
	workloadIP: func(i int) netip.Addr {
		return netip.AddrFrom16([16]byte{0xfd, 0, 0, 0x10, 0x02, 0x44, 14: byte(i >> 8), 15: byte(i)})
	},
	remotePrefix: func(i int) netip.Prefix { // /122 blocks, Calico's IPv6 default
		return netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 0, 0, 0x10, 0x02, 0x50, 13: byte(i >> 10), 14: byte(i >> 2), 15: byte(i&3) << 6}), 122)
	},
}

// syncRun is one family's full-sync measurement; its felix stays up for the other measures.
type syncRun struct {
	f                   *felix.Felix
	fNS                 *benchNS
	wl                  []model.Workload
	ipTimes, felixTimes []time.Duration
	closers             []func()
}

func (s *syncRun) close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
}

// fullSync times `ip -batch` and a fresh felix's first apply of the same routes, each in its
// own namespace, rounds times. keep leaves the last felix running for the caller.
func fullSync(ctx context.Context, rs routeSet, keep bool) (_ *syncRun, err error) {
	s := &syncRun{}
	defer func() {
		if err != nil || !keep {
			s.close()
		}
	}()
	ipNS, err := newNS()
	if err != nil {
		return nil, err
	}
	s.closers = append(s.closers, ipNS.close)
	fNS, err := newNS()
	if err != nil {
		return nil, err
	}
	s.closers = append(s.closers, fNS.close)
	s.fNS = fNS

	var script strings.Builder
	for i := 0; i < workloads; i++ {
		fmt.Fprintf(&script, "route add %s dev %s proto %d\n", netip.PrefixFrom(rs.workloadIP(i), rs.workloadIP(i).BitLen()), vethName(i%veths), v1.RouteProtocol)
	}
	for i := 0; i < remotes; i++ {
		fmt.Fprintf(&script, "route add %s via %s dev up0 proto %d\n", rs.remotePrefix(i), rs.nextHop, v1.RouteProtocol)
	}
	batchFile := filepath.Join(os.TempDir(), fmt.Sprintf("tabby-bench-felix-%d-%s.batch", os.Getpid(), rs.name))
	if err := os.WriteFile(batchFile, []byte(script.String()), 0o600); err != nil {
		return nil, err
	}
	defer os.Remove(batchFile)
	for r := 0; r < rounds; r++ {
		if err := ipNS.flush(); err != nil {
			return nil, err
		}
		start := time.Now()
		if out, err := exec.Command("ip", "-n", ipNS.name(), rs.ipFlag, "-batch", batchFile).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("ip %s -batch: %v: %s", rs.ipFlag, err, out)
		}
		s.ipTimes = append(s.ipTimes, time.Since(start))
	}
	if n := ipNS.count(); n != workloads+remotes {
		return nil, fmt.Errorf("ip %s -batch made %d routes, want %d", rs.ipFlag, n, workloads+remotes)
	}

	s.wl = workloadsOn(rs, workloads)
	for r := 0; r < rounds; r++ {
		if s.f != nil {
			s.f.Close()
		}
		if err := fNS.flush(); err != nil {
			return nil, err
		}
		f, err := felix.New(felix.Config{NodeName: "bench", UplinkInterface: ipfamily.PairOf("up0", ""), NetNSPath: fNS.Path(), ResyncInterval: time.Hour})
		if err != nil {
			return nil, err
		}
		s.f = f
		node := model.Node{Name: "bench"}
		node.BGPAddress.Set(ipfamily.OfPrefix(rs.nodeAddr), rs.nodeAddr)
		f.OnUpdate(model.NodeUpdate{Node: node})
		for _, p := range rs.pools {
			f.OnUpdate(model.PoolUpdate{Pool: p})
		}
		for _, w := range s.wl {
			f.OnUpdate(model.WorkloadUpdate{Workload: w})
		}
		for i := 0; i < remotes; i++ {
			f.OnUpdate(model.RouteUpdate{Prefix: rs.remotePrefix(i), NextHop: rs.nextHop})
		}
		start := time.Now()
		if err := f.ApplyNow(ctx); err != nil {
			return nil, fmt.Errorf("felix full sync of %s routes: %w", rs.name, err)
		}
		s.felixTimes = append(s.felixTimes, time.Since(start))
	}
	s.closers = append(s.closers, func() { s.f.Close() })
	if n := fNS.count(); n != workloads+remotes {
		return nil, fmt.Errorf("felix made %d %s routes, want %d", n, rs.name, workloads+remotes)
	}
	return s, nil
}

// workloadsOn is n pods' addresses spread over the veths, as one workload per veth: the bench's
// namespace has 100 veths, not one per pod.
func workloadsOn(rs routeSet, n int) []model.Workload {
	ws := make([]model.Workload, veths)
	for i := range ws {
		ws[i] = model.Workload{Pod: model.PodKey{Namespace: "bench", Name: fmt.Sprint("pod-", i)}, Interface: vethName(i)}
	}
	for i := 0; i < n; i++ {
		ws[i%veths].IPs = append(ws[i%veths].IPs, rs.workloadIP(i))
	}
	return ws
}
