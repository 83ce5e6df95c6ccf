// Package plugin is the tabby CNI plugin: ADD, DEL, CHECK, STATUS and GC for a routed veth per
// pod, with addresses from tabby's IPAM (tabby-node's socket, or the API server directly).
package plugin

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/tabbynet/tabby/apis/names"
	"github.com/tabbynet/tabby/cni-plugin/cnierr"
	"github.com/tabbynet/tabby/cni-plugin/config"
	"github.com/tabbynet/tabby/cni-plugin/dataplane"
	"github.com/tabbynet/tabby/cni-plugin/ipamclient"
	"github.com/tabbynet/tabby/ipam/rpc/api"
)

// Plugin holds what differs between the binary and tests: how the direct IPAM path is built.
type Plugin struct {
	Direct ipamclient.DirectOpener
}

// Funcs are the skel callbacks.
func (p *Plugin) Funcs() skel.CNIFuncs {
	return skel.CNIFuncs{Add: p.Add, Del: p.Del, Check: p.Check, GC: p.GC, Status: p.Status}
}

// Main runs the plugin (cmd/tabby).
func Main(direct ipamclient.DirectOpener, about string) {
	p := &Plugin{Direct: direct}
	skel.PluginMainFuncs(p.Funcs(), config.PluginInfo, about)
}

// invocation is what every command needs.
type invocation struct {
	conf   *config.NetConf
	k8s    *config.K8sArgs
	log    *slog.Logger
	ipam   *ipamclient.Conn
	handle string
	att    dataplane.Attachment
}

func (p *Plugin) start(args *skel.CmdArgs, cmd string) (*invocation, *types.Error) {
	conf, err := config.Parse(args.StdinData)
	if err != nil {
		return nil, cniError(types.ErrInvalidNetworkConfig, "invalid tabby network configuration", err)
	}
	k8s, err := config.ParseArgs(args.Args)
	if err != nil {
		return nil, cniError(types.ErrInvalidEnvironmentVariables, "invalid CNI_ARGS", err)
	}
	log := newLogger(conf.LogLevel).With("cmd", cmd, "container", args.ContainerID,
		"pod", string(k8s.K8S_POD_NAMESPACE)+"/"+string(k8s.K8S_POD_NAME))
	inv := &invocation{
		conf: conf, k8s: k8s, log: log,
		handle: config.Handle(conf.Name, args.ContainerID),
		att: dataplane.Attachment{
			Netns:    args.Netns,
			IfName:   args.IfName,
			HostVeth: names.HostVethName(string(k8s.K8S_POD_NAMESPACE), string(k8s.K8S_POD_NAME), args.ContainerID),
			Owner:    config.Handle(conf.Name, args.ContainerID),
		},
	}
	inv.ipam = ipamclient.Open(ipamclient.Options{
		Socket: conf.IPAMSocket, Kubeconfig: conf.Kubeconfig, StrictAffinity: conf.IPAM.StrictAffinity,
		Direct: p.Direct, Log: log,
	})
	return inv, nil
}

func newLogger(level string) *slog.Logger {
	var l slog.Level
	switch level {
	case "debug":
		l = slog.LevelDebug
	case "info":
		l = slog.LevelInfo
	case "error":
		l = slog.LevelError
	default:
		l = slog.LevelWarn
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})).With("plugin", "tabby")
}

// Add attaches a container. It is linear, and every step that changed something registers its
// undo: on any failure the address is released and the veth (with its routes) deleted.
func (p *Plugin) Add(args *skel.CmdArgs) (err error) {
	start := time.Now()
	inv, cerr := p.start(args, "ADD")
	if cerr != nil {
		return cerr
	}
	defer inv.ipam.Close()
	ctx, cancel := context.WithTimeout(context.Background(), inv.conf.Timeout())
	defer cancel()

	// A missing netns fails before any allocation: nothing to undo.
	if err := dataplane.CheckNetns(args.Netns); err != nil {
		return dataplaneError("open container netns", err)
	}

	// A repeated ADD for the same container finds its pair and its address, and creates nothing.
	if links, ok, err := dataplane.Existing(inv.att); err != nil {
		return dataplaneError("inspect container netns", err)
	} else if ok {
		look, err := inv.ipam.Lookup(ctx, &api.LookupRequest{Handle: inv.handle, Node: inv.conf.NodeName})
		if err != nil {
			return ipamError("look up existing address", err)
		}
		if ips := addrsOf(look.Assignments); len(ips) > 0 {
			inv.att.IPs = ips
			if dataplane.Check(inv.att) == nil {
				inv.log.Info("repeated ADD: attachment already complete", "ips", ips)
				return p.printResult(inv, links, look.Assignments)
			}
		}
		inv.log.Info("repeated ADD found an incomplete attachment: rebuilding it")
	}

	// IPAM (a round trip to tabby-node and API writes) and the veth (kernel work) do not depend
	// on each other: run them side by side, and join before the addresses go on.
	type assigned struct {
		reply *api.AssignReply
		err   error
	}
	ach := make(chan assigned, 1)
	tIPAM := time.Now()
	var ipamTook time.Duration
	go func() {
		r, err := inv.ipam.Assign(ctx, &api.AssignRequest{
			Handle: inv.handle, Node: inv.conf.NodeName,
			Namespace: string(inv.k8s.K8S_POD_NAMESPACE), Pod: string(inv.k8s.K8S_POD_NAME),
			Pools: inv.conf.IPAM.Pools, AssignIPv4: inv.conf.IPAM.AssignIPv4, AssignIPv6: inv.conf.IPAM.AssignIPv6, MultiFamily: true,
		})
		ipamTook = time.Since(tIPAM)
		ach <- assigned{r, err}
	}()
	inv.att.MTU = inv.conf.MTU
	var uplinkMTU int
	if inv.att.MTU == 0 {
		// Until the pool (and so its encapsulation) is known, the uplink's.
		if uplinkMTU, err = dataplane.UplinkMTU(inv.conf.NodeAddressInterface); err == nil {
			inv.att.MTU = uplinkMTU
		}
	}
	var pair *dataplane.Pair
	var perr error
	if err == nil {
		pair, perr = dataplane.CreatePair(inv.att)
	}
	pairTook := time.Since(tIPAM)
	ar := <-ach
	if ar.err == nil {
		defer func() {
			if err == nil {
				return
			}
			// The invocation's context may be what expired: undo gets its own.
			uctx, ucancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer ucancel()
			if _, rerr := inv.ipam.Release(uctx, &api.ReleaseRequest{Handle: inv.handle, Node: inv.conf.NodeName}); rerr != nil {
				inv.log.Error("undo: release address failed", "handle", inv.handle, "err", rerr)
				if te, ok := err.(*types.Error); ok {
					err = withUndo(te, "release of "+inv.handle, rerr)
				}
			}
		}()
	}
	if pair != nil {
		defer pair.Close()
		defer func() {
			if err == nil {
				return
			}
			if derr := pair.Delete(); derr != nil {
				inv.log.Error("undo: delete veth failed", "hostVeth", inv.att.HostVeth, "err", derr)
				if te, ok := err.(*types.Error); ok {
					err = withUndo(te, "delete of "+inv.att.HostVeth, derr)
				}
			}
		}()
	}
	if err != nil {
		return cniError(types.ErrInvalidNetworkConfig, "find the pod MTU", err)
	}
	if perr != nil {
		return dataplaneError("set up pod interface", perr)
	}
	if ar.err != nil {
		return ipamError("assign address", ar.err)
	}
	asgs := ar.reply.All()
	inv.att.IPs = addrsOf(asgs)
	// The pod's one interface carries every family: the largest overhead of its pools bounds it.
	overhead := 0
	for _, a := range asgs {
		overhead = max(overhead, a.EncapOverhead())
	}
	if inv.conf.MTU == 0 && overhead > 0 {
		inv.att.MTU = uplinkMTU - overhead
		if err := pair.SetMTU(inv.att.MTU); err != nil {
			return dataplaneError("set pod MTU", err)
		}
	}
	links, err := pair.Configure(inv.att.IPs)
	if err != nil {
		return dataplaneError("configure pod interface", err)
	}
	inv.log.Info("pod attached", "ips", inv.att.IPs, "hostVeth", inv.att.HostVeth, "mtu", inv.att.MTU,
		"ipam", inv.ipam.Path, "took", time.Since(start), "ipamTook", ipamTook, "vethTook", pairTook)
	return p.printResult(inv, links, asgs)
}

func addrsOf(as []api.Assignment) []netip.Addr {
	out := make([]netip.Addr, 0, len(as))
	for _, a := range as {
		out = append(out, a.IP)
	}
	return out
}

// printResult writes the result in the configuration's cniVersion, appended to prevResult when
// tabby is not first in its chain.
func (p *Plugin) printResult(inv *invocation, links dataplane.Links, as []api.Assignment) error {
	res := &current.Result{CNIVersion: current.ImplementedSpecVersion}
	if inv.conf.PrevResult != nil {
		prev, err := current.NewResultFromResult(inv.conf.PrevResult)
		if err != nil {
			return cniError(types.ErrDecodingFailure, "convert prevResult", err)
		}
		res = prev
	}
	base := len(res.Interfaces)
	res.Interfaces = append(res.Interfaces,
		&current.Interface{Name: inv.att.HostVeth, Mac: links.HostMAC.String()},
		&current.Interface{Name: inv.att.IfName, Mac: links.ContainerMAC.String(), Sandbox: inv.att.Netns},
	)
	for _, a := range as {
		gw := net.IP(dataplane.GatewayFor(a.IP).AsSlice())
		bits := a.IP.BitLen()
		res.IPs = append(res.IPs, &current.IPConfig{
			Interface: current.Int(base + 1),
			Address:   net.IPNet{IP: a.IP.AsSlice(), Mask: net.CIDRMask(bits, bits)},
			Gateway:   gw,
		})
		res.Routes = append(res.Routes, &types.Route{Dst: net.IPNet{IP: make(net.IP, bits/8), Mask: net.CIDRMask(0, bits)}, GW: gw})
	}
	if err := types.PrintResult(res, inv.conf.CNIVersion); err != nil {
		return cniError(types.ErrIOFailure, fmt.Sprintf("print result as cniVersion %s", inv.conf.CNIVersion), err)
	}
	return nil
}

// Del detaches a container. Everything already gone counts as done: DEL of an unknown container,
// a repeated DEL, or a DEL after the netns was removed all succeed.
func (p *Plugin) Del(args *skel.CmdArgs) error {
	start := time.Now()
	inv, cerr := p.start(args, "DEL")
	if cerr != nil {
		return cerr
	}
	defer inv.ipam.Close()
	ctx, cancel := context.WithTimeout(context.Background(), inv.conf.Timeout())
	defer cancel()

	// Whether the netns is still there decides what Release must report; the teardown (kernel
	// work, slow for veths) and the release (IPAM round trip) then run side by side.
	nsFound := dataplane.CheckNetns(args.Netns) == nil
	// The host side is tabby's: find the host veth before anything else. When the netns path is
	// gone (something may still hold the namespace, and so the pair) or names another namespace
	// by now, removing the container interface does not remove it. Before the release, since
	// felix drops a released address's route at once and a veth made before owners were
	// recorded is known by that route.
	veth, vethFound, err := dataplane.FindHostVeth(inv.att.HostVeth)
	if err != nil {
		return dataplaneError("find host veth", err)
	}
	type released struct {
		reply *api.ReleaseReply
		err   error
	}
	rch := make(chan released, 1)
	// The runtime's record of the ADD lets IPAM skip a read; without a usable one it reads.
	held, _ := inv.conf.PrevAddresses()
	go func() {
		r, err := inv.ipam.Release(ctx, &api.ReleaseRequest{Handle: inv.handle, Node: inv.conf.NodeName, Addresses: held, WantReleased: vethFound && veth.Alias == ""})
		rch <- released{r, err}
	}()
	var terr error
	if nsFound {
		_, terr = dataplane.Teardown(args.Netns, args.IfName)
	}
	rel := <-rch
	if terr != nil {
		return dataplaneError("remove pod interface", terr)
	}
	if rel.err != nil {
		return ipamError("release address", rel.err)
	}
	if vethFound && veth.OwnedBy(inv.att.Owner, addrsOf(rel.reply.Released)) {
		if err := veth.Remove(); err != nil {
			return dataplaneError("remove host veth", err)
		}
	}
	inv.log.Info("pod detached", "released", addrsOf(rel.reply.Released), "netnsFound", nsFound, "ipam", inv.ipam.Path, "took", time.Since(start))
	return nil
}

// Check verifies the attachment against prevResult and IPAM.
func (p *Plugin) Check(args *skel.CmdArgs) error {
	inv, cerr := p.start(args, "CHECK")
	if cerr != nil {
		return cerr
	}
	defer inv.ipam.Close()
	ctx, cancel := context.WithTimeout(context.Background(), inv.conf.Timeout())
	defer cancel()
	if inv.conf.PrevResult == nil {
		return cniError(types.ErrInvalidNetworkConfig, "CHECK needs prevResult", nil)
	}
	var err error
	if inv.att.IPs, err = inv.conf.PrevAddresses(); err != nil {
		return cniError(types.ErrDecodingFailure, "prevResult", err)
	}
	if len(inv.att.IPs) == 0 {
		return cniError(cnierr.CheckFailed, "CHECK: prevResult has no address", nil)
	}
	if err := dataplane.Check(inv.att); err != nil {
		return dataplaneCheckError(err)
	}
	look, err := inv.ipam.Lookup(ctx, &api.LookupRequest{Handle: inv.handle, Node: inv.conf.NodeName})
	if err != nil {
		return ipamError("CHECK: look up addresses", err)
	}
	held := addrsOf(look.Assignments)
	for _, ip := range inv.att.IPs {
		found := false
		for _, h := range held {
			found = found || h == ip
		}
		if !found {
			return cniError(cnierr.CheckFailed, "CHECK: address not allocated", fmt.Errorf("IPAM handle %s does not hold %s (holds %v)", inv.handle, ip, held))
		}
	}
	return nil
}

func dataplaneCheckError(err error) *types.Error {
	if e := dataplaneError("CHECK", err); e.Code != cnierr.Dataplane {
		return e
	}
	return cniError(cnierr.CheckFailed, "CHECK: attachment incomplete", err)
}

// Status reports whether an ADD could get an address now.
func (p *Plugin) Status(args *skel.CmdArgs) error {
	inv, cerr := p.start(args, "STATUS")
	if cerr != nil {
		return cerr
	}
	defer inv.ipam.Close()
	ctx, cancel := context.WithTimeout(context.Background(), inv.conf.Timeout())
	defer cancel()
	if _, err := inv.ipam.Ready(ctx, &api.ReadyRequest{Node: inv.conf.NodeName}); err != nil {
		return cniError(cnierr.NotAvailable, "tabby cannot allocate addresses on node "+inv.conf.NodeName, err)
	}
	return nil
}

// GC releases this node's addresses of this network whose attachment the runtime no longer has.
func (p *Plugin) GC(args *skel.CmdArgs) error {
	inv, cerr := p.start(args, "GC")
	if cerr != nil {
		return cerr
	}
	defer inv.ipam.Close()
	ctx, cancel := context.WithTimeout(context.Background(), inv.conf.Timeout())
	defer cancel()
	keep := make([]string, 0, len(inv.conf.ValidAttachments))
	for _, a := range inv.conf.ValidAttachments {
		keep = append(keep, config.Handle(inv.conf.Name, a.ContainerID))
	}
	out, err := inv.ipam.GC(ctx, &api.GCRequest{Node: inv.conf.NodeName, Network: inv.conf.Name, Keep: keep})
	if err != nil {
		return ipamError("GC", err)
	}
	// The host side is tabby's: a released attachment's host veth goes too, when something
	// still holds its netns (the runtime only tears down namespaces it can see).
	keepSet := make(map[string]bool, len(keep))
	for _, h := range keep {
		keepSet[h] = true
	}
	removed, err := dataplane.RemoveOrphanVeths(inv.conf.Name, keepSet)
	if err != nil {
		return dataplaneError("remove host veths of released attachments", err)
	}
	inv.log.Info("GC", "released", out.Released, "hostVethsRemoved", removed)
	return nil
}
