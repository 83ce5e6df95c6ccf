package main

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// bird2Run measures BIRD2 (Debian's bird2) in the same topology: node i exports what it learns
// over BGP to kernel table 1000+i and learns its own prefixes from blackhole routes in that
// table (Calico's way of originating blocks); arrival is the RTM_NEWROUTE of the table.
func bird2Run(tp topology) (result, error) {
	res := result{name: tp.name}
	if _, err := exec.LookPath("bird"); err != nil {
		return res, fmt.Errorf("bird2 not installed: %w", err)
	}
	dir, err := os.MkdirTemp("", "tabby-bench-bird2-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)

	updates := make(chan netlink.RouteUpdate, 4096)
	done := make(chan struct{})
	defer close(done)
	if err := netlink.RouteSubscribeWithOptions(updates, done, netlink.RouteSubscribeOptions{}); err != nil {
		return res, fmt.Errorf("subscribe to routes: %w", err)
	}
	sn := &seen{at: map[netip.Prefix]map[string]time.Time{}, wake: make(chan struct{})}
	go func() {
		for u := range updates {
			if u.Type != unix.RTM_NEWROUTE || u.Table <= 1000 || u.Table > 1000+nodes || u.Dst == nil || u.Protocol != unix.RTPROT_BIRD {
				continue
			}
			p, ok := netip.AddrFromSlice(u.Dst.IP.To4())
			if !ok {
				continue
			}
			ones, _ := u.Dst.Mask.Size()
			sn.mark(fmt.Sprintf("node%d", u.Table-1000), netip.PrefixFrom(p, ones), time.Now())
		}
	}()

	start := time.Now()
	var procs []*exec.Cmd
	defer func() {
		for _, c := range procs {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
		for i := 1; i <= nodes; i++ {
			_ = exec.Command("ip", "route", "flush", "table", fmt.Sprint(1000+i)).Run()
		}
	}()
	for i := 1; i <= nodes; i++ {
		conf := filepath.Join(dir, fmt.Sprintf("bird%d.conf", i))
		if err := os.WriteFile(conf, []byte(bird2Config(tp, i)), 0o644); err != nil {
			return res, err
		}
		if err := blackhole(block(i), i); err != nil {
			return res, err
		}
		cmd := exec.Command("bird", "-f", "-c", conf, "-s", filepath.Join(dir, fmt.Sprintf("bird%d.ctl", i)), "-P", filepath.Join(dir, fmt.Sprintf("bird%d.pid", i)))
		cmd.Stderr = os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return res, err
		}
		procs = append(procs, cmd)
	}
	for i := 1; i <= nodes; i++ {
		if _, err := sn.waitAll(block(i), nodes-1, 60*time.Second); err != nil {
			return res, fmt.Errorf("BIRD2 convergence: %w", err)
		}
	}
	res.converge = time.Since(start)
	for k := 0; k < samples; k++ {
		p := extra(k)
		t0 := time.Now()
		if err := blackhole(p, tp.source); err != nil {
			return res, err
		}
		got, err := sn.waitAll(p, nodes-1, 10*time.Second)
		if err != nil {
			return res, fmt.Errorf("BIRD2: %w", err)
		}
		var last time.Duration
		for _, at := range got {
			d := at.Sub(t0)
			res.hop = append(res.hop, d)
			last = max(last, d)
		}
		res.lat = append(res.lat, last)
	}
	return res, nil
}

func blackhole(p netip.Prefix, node int) error {
	r := &netlink.Route{Dst: netipToIPNet(p), Type: unix.RTN_BLACKHOLE, Table: 1000 + node, Protocol: unix.RTPROT_STATIC}
	if err := netlink.RouteAdd(r); err != nil {
		return fmt.Errorf("blackhole %s in table %d: %w", p, 1000+node, err)
	}
	return nil
}

func bird2Config(tp topology, i int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `router id %s;
protocol device { scan time 10; }
protocol kernel {
	ipv4 { import all; export filter { if source = RTS_BGP then accept; reject; }; };
	kernel table %d; learn; scan time 10;
}
template bgp tabby {
	local %s as 64512; strict bind yes;
	connect delay time 1; connect retry time 1; hold time 9; keepalive time 3;
	ipv4 { import all; export filter { if net ~ [ 10.244.0.0/16+ ] then accept; reject; }; next hop self; };
}
`, addr(i), 1000+i, addr(i))
	isRR := tp.rr(i)
	for j := 1; j <= nodes; j++ {
		if j == i {
			continue
		}
		switch {
		case tp.conf == nil: // mesh
		case isRR && tp.rr(j): // reflectors peer as non-clients
		case isRR:
			fmt.Fprintf(&b, "protocol bgp p%d from tabby { neighbor %s as 64512; rr client; rr cluster id 244.0.0.1; }\n", j, addr(j))
			continue
		case tp.rr(j):
		default:
			continue
		}
		fmt.Fprintf(&b, "protocol bgp p%d from tabby { neighbor %s as 64512; }\n", j, addr(j))
	}
	return b.String()
}

func netipToIPNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 32)}
}
