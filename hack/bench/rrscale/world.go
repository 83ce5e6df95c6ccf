package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/bird/peers"
	"github.com/tabbynet/tabby/hack/lab"
)

const (
	rrClusterID = "244.0.0.1"
	asn         = 64512
)

// world is the lab with its two reflector nodes, the injector's namespace on the same switch
// and N client Node objects in the API server.
type world struct {
	o       options
	lab     *lab.Lab
	rrs     []*lab.Node
	rrAddrs []netip.Addr
	injNS   string
	clients []netip.Addr
	inj     *injector
}

// clientAddr is client i's address: 2001:db8:100::1:1 upwards, on the lab's subnet A above
// its router (::1) and nodes (::11…), so each reflector, lower, dials its clients as a tabby
// reflector dials the nodes above it.
func clientAddr(i int) netip.Addr {
	a := lab.SubnetA6.Addr().As16()
	a[13], a[14], a[15] = 1, byte((i+1)>>8), byte(i+1)
	return netip.AddrFrom16(a)
}

// blockAt is the k-th /122 of the run in the lab's IPv6 pool: one per client, then the
// samples' new blocks.
func blockAt(k int) netip.Prefix {
	a := lab.PodCIDR6.Addr().As16()
	a[7] = 1
	v := uint32(k) * 64
	a[12], a[13], a[14], a[15] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
	return netip.PrefixFrom(netip.AddrFrom16(a), 122)
}

// sampleOwner spreads the sampled new blocks evenly over the clients.
func sampleOwner(k, clients, samples int) int { return k * clients / max(1, samples) % clients }

func clientName(i int) string { return fmt.Sprintf("client-%04d", i+1) }

// startWorld builds everything except the reflectors' daemons; the caller closes it.
func startWorld(ctx context.Context, o options) (_ *world, err error) {
	args := []string{"--ipam-gc-interval=1m", "--ipam-gc-grace=5m"}
	if o.profile != "" || o.heapProfile != "" {
		args = append(args, "--pprof")
	}
	l, err := lab.New(ctx, o.Lab(lab.Options{Families: lab.IPv6Only, AgentArgs: args}))
	if err != nil {
		return nil, fmt.Errorf("start lab: %w", err)
	}
	w := &world{o: o, lab: l, injNS: l.NetnsName("inj")}
	defer func() {
		if err != nil {
			err = errors.Join(err, w.close())
		}
	}()
	if err := l.UseRouteReflectors(ctx); err != nil {
		return w, err
	}
	if o.holdTime > 0 {
		if err := setHoldTime(ctx, l, o.holdTime); err != nil {
			return w, err
		}
	}
	// The agents start later, at the measured instant.
	if w.rrs, err = l.AddNodes(ctx,
		lab.NodeSpec{Name: "rr-1", RouteReflectorClusterID: rrClusterID, NoAgent: true},
		lab.NodeSpec{Name: "rr-2", RouteReflectorClusterID: rrClusterID, NoAgent: true}); err != nil {
		return w, fmt.Errorf("add reflector nodes: %w", err)
	}
	for _, n := range w.rrs {
		w.rrAddrs = append(w.rrAddrs, n.IP6())
	}
	for i := range o.clients {
		w.clients = append(w.clients, clientAddr(i))
	}
	blocks := make([]netip.Prefix, o.clients+o.samples)
	owner := make([]int, len(blocks))
	for k := range blocks {
		blocks[k], owner[k] = blockAt(k), k
		if k >= o.clients {
			owner[k] = sampleOwner(k-o.clients, o.clients, o.samples)
		}
	}
	w.inj = newInjector(w.clients, w.rrAddrs, blocks, owner, asn)
	for _, n := range w.rrs {
		id := peers.RouterID(model.Node{Name: n.Name})
		if id.As4()[0] == w.inj.clients[0].id[0] && int(id.As4()[1])<<16|int(id.As4()[2])<<8|int(id.As4()[3]) < o.clients {
			return w, fmt.Errorf("reflector %s's router ID %s is a client's", n.Name, id)
		}
	}
	if err := w.wireInjector(ctx); err != nil {
		return w, fmt.Errorf("injector namespace: %w", err)
	}
	if err := w.createClientNodes(ctx); err != nil {
		return w, err
	}
	if err := w.inj.listen(w.injNS); err != nil {
		return w, fmt.Errorf("injector listen: %w", err)
	}
	go w.inj.serve()
	return w, nil
}

// close removes the lab, and with it the injector's namespace (named after the lab, so the
// lab's own sweep and its leftover cleanup find it too).
func (w *world) close() error {
	if w == nil || w.lab == nil {
		return nil
	}
	if w.inj != nil {
		w.inj.close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*w.o.closeTimeout)
	defer cancel()
	err := w.lab.Close(ctx)
	w.lab = nil
	return err
}

func ipCmd(ctx context.Context, stdin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "ip", args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// wireInjector gives the injector a port on the lab's switch with every client's address,
// and the reflectors permanent neighbour entries for them: the kernel's neighbour table is
// shared by all namespaces and, past gc_thresh3 (1024 by default) dynamic entries, drops
// new ones; permanent entries do not count.
func (w *world) wireInjector(ctx context.Context) error {
	inj, sw := w.injNS, w.lab.NetnsName("sw")
	ta, tb := "tl"+w.lab.ID+"j0", "tl"+w.lab.ID+"j1"
	steps := [][]string{
		{"netns", "add", inj},
		{"-n", inj, "link", "set", "lo", "up"},
		{"link", "add", ta, "netns", inj, "type", "veth", "peer", "name", tb, "netns", sw},
		{"-n", inj, "link", "set", ta, "name", "eth0"},
		{"-n", sw, "link", "set", tb, "master", "br-a", "up"},
		{"-n", inj, "link", "set", "eth0", "up"},
	}
	for _, st := range steps {
		if _, err := ipCmd(ctx, "", st...); err != nil {
			return err
		}
	}
	var batch strings.Builder
	for _, a := range w.clients {
		fmt.Fprintf(&batch, "addr add %s/%d dev eth0 nodad\n", a, lab.SubnetA6.Bits())
	}
	if _, err := ipCmd(ctx, batch.String(), "-n", inj, "-batch", "-"); err != nil {
		return err
	}
	out, err := ipCmd(ctx, "", "-n", inj, "-j", "link", "show", "eth0")
	if err != nil {
		return err
	}
	var links []struct {
		Address string `json:"address"`
	}
	if err := json.Unmarshal([]byte(out), &links); err != nil || len(links) != 1 {
		return fmt.Errorf("injector eth0 MAC: %v: %s", err, out)
	}
	batch.Reset()
	for _, a := range w.clients {
		fmt.Fprintf(&batch, "neigh replace %s lladdr %s dev eth0 nud permanent\n", a, links[0].Address)
	}
	for _, n := range w.rrs {
		if _, err := ipCmd(ctx, batch.String(), "-n", n.NS, "-batch", "-"); err != nil {
			return err
		}
	}
	return nil
}

// createClientNodes writes one Node per client with what a reflector's BGPPeer selectors and
// peer computation read: no route-reflector label, and the IPv6 BGP address annotation.
func (w *world) createClientNodes(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for g := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < len(w.clients); i += len(errs) {
				n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: clientName(i),
					Labels:      map[string]string{"kubernetes.io/hostname": clientName(i), "kubernetes.io/os": "linux"},
					Annotations: map[string]string{v1.AnnotationBGPIPv6Address: netip.PrefixFrom(w.clients[i], lab.SubnetA6.Bits()).String()}}}
				if _, err := w.lab.Kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
					errs[g] = fmt.Errorf("create Node %s: %w", n.Name, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// setHoldTime sets the BGPConfiguration's hold time (keepalive a third of it) between nodes.
func setHoldTime(ctx context.Context, l *lab.Lab, hold time.Duration) error {
	cfg, err := l.Client.BGPConfigurations().Get(ctx, v1.DefaultBGPConfigurationName)
	if err != nil {
		return fmt.Errorf("BGPConfiguration %s: %w", v1.DefaultBGPConfigurationName, err)
	}
	cfg.Spec.HoldTime, cfg.Spec.KeepaliveTime = &metav1.Duration{Duration: hold}, &metav1.Duration{Duration: hold / 3}
	if _, err := l.Client.BGPConfigurations().Update(ctx, cfg); err != nil {
		return fmt.Errorf("BGPConfiguration %s: hold time: %w", v1.DefaultBGPConfigurationName, err)
	}
	return nil
}
