// Package ipamplugin is tabby-ipam, tabby's IPAM as a standalone CNI IPAM plugin for other main
// plugins (ptp, bridge...): ADD returns one IPv4 address as a /32, DEL releases the container's
// handle. It reads the same configuration keys as tabby (nodename, kubeconfig, ipamSocket at the
// top level; pools and strictAffinity under "ipam") and uses the same IPAM client.
package ipamplugin

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/tabbynet/tabby/cni-plugin/cnierr"
	"github.com/tabbynet/tabby/cni-plugin/config"
	"github.com/tabbynet/tabby/cni-plugin/ipamclient"
	"github.com/tabbynet/tabby/ipam/rpc/api"
)

// Plugin is tabby-ipam.
type Plugin struct {
	Direct ipamclient.DirectOpener
}

// Main runs tabby-ipam (cmd/tabby-ipam). With ipamclient.ExecEnv set it serves one IPAM call
// for the tabby binary's direct path instead.
func Main(direct ipamclient.DirectOpener, about string) {
	if method := os.Getenv(ipamclient.ExecEnv); method != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := ipamclient.ServeExec(ctx, method, direct, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "tabby-ipam:", err)
			os.Exit(1)
		}
		return
	}
	p := &Plugin{Direct: direct}
	skel.PluginMainFuncs(skel.CNIFuncs{Add: p.Add, Del: p.Del, Check: p.Check, GC: p.GC, Status: p.Status}, config.PluginInfo, about)
}

type invocation struct {
	conf   *config.NetConf
	k8s    *config.K8sArgs
	ipam   *ipamclient.Conn
	handle string
	ctx    context.Context
	cancel context.CancelFunc
}

func (p *Plugin) start(args *skel.CmdArgs) (*invocation, error) {
	conf, err := config.Parse(args.StdinData)
	if err != nil {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, "invalid tabby-ipam configuration", err.Error())
	}
	k8s, err := config.ParseArgs(args.Args)
	if err != nil {
		return nil, types.NewError(types.ErrInvalidEnvironmentVariables, "invalid CNI_ARGS", err.Error())
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("plugin", "tabby-ipam", "container", args.ContainerID)
	ctx, cancel := context.WithTimeout(context.Background(), conf.Timeout())
	return &invocation{
		conf: conf, k8s: k8s, handle: config.Handle(conf.Name, args.ContainerID), ctx: ctx, cancel: cancel,
		ipam: ipamclient.Open(ipamclient.Options{Socket: conf.IPAMSocket, Kubeconfig: conf.Kubeconfig,
			StrictAffinity: conf.IPAM.StrictAffinity, Direct: p.Direct, Log: log}),
	}, nil
}

func (inv *invocation) close() { inv.ipam.Close(); inv.cancel() }

func (p *Plugin) Add(args *skel.CmdArgs) error {
	inv, err := p.start(args)
	if err != nil {
		return err
	}
	defer inv.close()
	r, err := inv.ipam.Assign(inv.ctx, &api.AssignRequest{Handle: inv.handle, Node: inv.conf.NodeName,
		Namespace: string(inv.k8s.K8S_POD_NAMESPACE), Pod: string(inv.k8s.K8S_POD_NAME), Pools: inv.conf.IPAM.Pools,
		// This plugin hands its caller one IPv4 address; it must not hold an IPv6 one unseen.
		AssignIPv6: "false"})
	if err != nil {
		return cnierr.IPAM("assign address", err)
	}
	res := &current.Result{CNIVersion: current.ImplementedSpecVersion, IPs: []*current.IPConfig{{
		Address: net.IPNet{IP: r.Assignment.IP.AsSlice(), Mask: net.CIDRMask(32, 32)},
	}}}
	return types.PrintResult(res, inv.conf.CNIVersion)
}

func (p *Plugin) Del(args *skel.CmdArgs) error {
	inv, err := p.start(args)
	if err != nil {
		return err
	}
	defer inv.close()
	held, _ := inv.conf.PrevAddresses() // lets IPAM skip a read; without a usable one it reads
	if _, err := inv.ipam.Release(inv.ctx, &api.ReleaseRequest{Handle: inv.handle, Node: inv.conf.NodeName, Addresses: held}); err != nil {
		return cnierr.IPAM("release address", err)
	}
	return nil
}

func (p *Plugin) Check(args *skel.CmdArgs) error {
	inv, err := p.start(args)
	if err != nil {
		return err
	}
	defer inv.close()
	l, err := inv.ipam.Lookup(inv.ctx, &api.LookupRequest{Handle: inv.handle, Node: inv.conf.NodeName})
	if err != nil {
		return cnierr.IPAM("look up addresses", err)
	}
	if len(l.Assignments) == 0 {
		return types.NewError(cnierr.CheckFailed, "CHECK: no address allocated", "IPAM handle "+inv.handle+" holds nothing")
	}
	prev, err := inv.conf.PrevAddresses()
	if err != nil {
		return types.NewError(types.ErrDecodingFailure, "prevResult", err.Error())
	}
	for _, ip := range prev {
		found := false
		for _, a := range l.Assignments {
			found = found || a.IP == ip
		}
		if !found {
			return types.NewError(cnierr.CheckFailed, "CHECK: address not allocated", fmt.Sprintf("IPAM handle %s does not hold %s", inv.handle, ip))
		}
	}
	return nil
}

func (p *Plugin) Status(args *skel.CmdArgs) error {
	inv, err := p.start(args)
	if err != nil {
		return err
	}
	defer inv.close()
	if _, err := inv.ipam.Ready(inv.ctx, &api.ReadyRequest{Node: inv.conf.NodeName}); err != nil {
		return types.NewError(cnierr.NotAvailable, "tabby-ipam cannot allocate addresses on node "+inv.conf.NodeName, err.Error())
	}
	return nil
}

func (p *Plugin) GC(args *skel.CmdArgs) error {
	inv, err := p.start(args)
	if err != nil {
		return err
	}
	defer inv.close()
	keep := make([]string, 0, len(inv.conf.ValidAttachments))
	for _, a := range inv.conf.ValidAttachments {
		keep = append(keep, config.Handle(inv.conf.Name, a.ContainerID))
	}
	if _, err := inv.ipam.GC(inv.ctx, &api.GCRequest{Node: inv.conf.NodeName, Network: inv.conf.Name, Keep: keep}); err != nil {
		return cnierr.IPAM("GC", err)
	}
	return nil
}
