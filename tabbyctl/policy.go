package tabbyctl

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/felix/policy"
	"github.com/tabbynet/tabby/node/syncer"
)

// The policy commands compute with felix's own calculator, from the same API objects and the
// same derivation (syncer.PolicyInput) tabby-node uses: what they say is what a node enforces.

func (a *app) policyCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "NetworkPolicy as tabby enforces it: which policies police a pod, verdicts, node checks",
	}
	cmd.AddCommand(a.policyShow(), a.policyCheck())
	return cmd
}

// policyInput reads what the calculator reads, for node (its endpoints; "" for none).
func (a *app) policyInput(ctx context.Context, node string) (policy.Input, error) {
	c, err := a.cluster()
	if err != nil {
		return policy.Input{}, err
	}
	return syncer.ReadPolicyInput(ctx, c, node)
}

// parsePodKey reads NAMESPACE/POD, or POD in the default namespace.
func parsePodKey(flag, s string) (policy.Key, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok {
		ns, name = "default", s
	}
	if ns == "" || name == "" || strings.Contains(name, "/") {
		return policy.Key{}, fmt.Errorf("%s: Invalid value: %q: want NAMESPACE/POD", flag, s)
	}
	return policy.Key{Namespace: ns, Name: name}, nil
}

// parsePort reads PORT or PORT/PROTOCOL (TCP when omitted).
func parsePort(s string) (uint16, policy.Protocol, error) {
	num, proto, ok := strings.Cut(s, "/")
	if !ok {
		proto = "TCP"
	}
	proto = strings.ToUpper(proto)
	n, err := strconv.ParseUint(num, 10, 16)
	if err != nil || n == 0 {
		return 0, "", fmt.Errorf("--port: Invalid value: %q: want PORT[/PROTOCOL], PORT in 1..65535", s)
	}
	switch proto {
	case "TCP", "UDP", "SCTP":
	default:
		return 0, "", fmt.Errorf("--port: Unsupported value: %q: supported protocols: TCP, UDP, SCTP", proto)
	}
	return uint16(n), policy.Protocol(proto), nil
}

// endpointRef is a --from/--to value: a pod or an address.
type endpointRef struct {
	pod  *policy.Key
	addr netip.Addr
}

func parseEndpointRef(flag, s string) (endpointRef, error) {
	if ip, err := netip.ParseAddr(s); err == nil {
		return endpointRef{addr: ip}, nil
	}
	k, err := parsePodKey(flag, s)
	if err != nil {
		return endpointRef{}, fmt.Errorf("%s: Invalid value: %q: want NAMESPACE/POD or an IP address", flag, s)
	}
	return endpointRef{pod: &k}, nil
}

// resolve returns the address of the ref: the pod's first IPAM address.
func (r endpointRef) resolve(in policy.Input, flag string) (netip.Addr, string, error) {
	if r.pod == nil {
		return r.addr, r.addr.String(), nil
	}
	p := in.Pods[*r.pod]
	if p == nil {
		return netip.Addr{}, "", fmt.Errorf("%s: pod %s not found", flag, r.pod)
	}
	addrs := in.Addrs(*r.pod)
	if len(addrs) == 0 {
		return netip.Addr{}, "", fmt.Errorf("%s: pod %s has no address from tabby's IPAM (host network, or not started yet)", flag, r.pod)
	}
	return addrs[0], fmt.Sprintf("%s (%s)", r.pod, addrs[0]), nil
}

func (a *app) policyShow() *cobra.Command {
	var from, to, port string
	cmd := &cobra.Command{
		Use:   "show NAMESPACE/POD",
		Short: "Which NetworkPolicies and admin network policies police a pod; with --from or --to and --port, the verdict for a new connection",
		Long: `Show which NetworkPolicies select the pod for ingress and for egress (a direction no
policy selects is open), and the AdminNetworkPolicies (by priority) and the
BaselineAdminNetworkPolicy whose subject it is, each with what its status conditions say when
it is not accepted as written or shares its priority. With --from (a connection into the pod) or --to
(a connection out of it) and --port, say whether a new connection is allowed and which tier and
rule decide, on both ends: the source's egress and the destination's ingress. Tiers are
evaluated in order: AdminNetworkPolicy, NetworkPolicy, BaselineAdminNetworkPolicy, then open.
The exit status is 1 when it is denied.`,
		Example: `  tabbyctl policy show shop/web
  tabbyctl policy show shop/web --from shop/frontend --port 8080
  tabbyctl policy show shop/web --to 10.0.0.53 --port 53/UDP`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := parsePodKey("POD", args[0])
			if err != nil {
				return err
			}
			var peer endpointRef
			peerFlag := ""
			switch {
			case from != "" && to != "":
				return fmt.Errorf("--from and --to: give one of them")
			case from != "":
				peerFlag = "--from"
				peer, err = parseEndpointRef(peerFlag, from)
			case to != "":
				peerFlag = "--to"
				peer, err = parseEndpointRef(peerFlag, to)
			}
			if err != nil {
				return err
			}
			var dport uint16
			var proto policy.Protocol
			if peerFlag != "" {
				if port == "" {
					return fmt.Errorf("%s needs --port: Required value", peerFlag)
				}
				if dport, proto, err = parsePort(port); err != nil {
					return err
				}
			} else if port != "" {
				return fmt.Errorf("--port: needs --from or --to")
			}
			in, err := a.policyInput(cmd.Context(), "")
			if err != nil {
				return err
			}
			calc := policy.NewCalculator(in)
			e := calc.Explain(key)
			if !e.Known {
				return fmt.Errorf("pod %s not found", key)
			}
			fmt.Fprintf(a.Out, "Pod %s %s\n", key, addrsText(in.Addrs(key)))
			if e.HostNetwork {
				fmt.Fprintln(a.Out, "  host network: not policed, and selected as a peer only by ipBlock (its address is the node's)")
			} else {
				fmt.Fprintf(a.Out, "  ingress: %s\n", selectionText(e.Ingress))
				fmt.Fprintf(a.Out, "  egress:  %s\n", selectionText(e.Egress))
				if len(e.AdminIngress)+len(e.AdminEgress) > 0 {
					fmt.Fprintf(a.Out, "  admin ingress: %s\n", adminText(in, e.AdminIngress))
					fmt.Fprintf(a.Out, "  admin egress:  %s\n", adminText(in, e.AdminEgress))
				}
			}
			if peerFlag == "" {
				return nil
			}
			self := endpointRef{pod: &key}
			src, dst, srcFlag, dstFlag := peer, self, peerFlag, "POD"
			if peerFlag == "--to" {
				src, dst, srcFlag, dstFlag = self, peer, "POD", peerFlag
			}
			srcIP, srcText, err := src.resolve(in, srcFlag)
			if err != nil {
				return err
			}
			dstIP, dstText, err := dst.resolve(in, dstFlag)
			if err != nil {
				return err
			}
			d := calc.Verdict(policy.Packet{Src: srcIP, Dst: dstIP, Protocol: proto, Port: dport})
			verdict := "denied"
			if d.Allowed {
				verdict = "allowed"
			}
			fmt.Fprintf(a.Out, "\n%s -> %s %d/%s: %s\n", srcText, dstText, dport, proto, verdict)
			// The rule lines are what flow logs record as the deciding rule.
			fmt.Fprintf(a.Out, "  egress of the source:       %s%s\n", tierText(d.Egress), d.Egress.Reason)
			fmt.Fprintf(a.Out, "    rule: %s\n", d.Egress.DecidingRule("egress"))
			fmt.Fprintf(a.Out, "  ingress of the destination: %s%s\n", tierText(d.Ingress), d.Ingress.Reason)
			fmt.Fprintf(a.Out, "    rule: %s\n", d.Ingress.DecidingRule("ingress"))
			if !d.Allowed {
				return &exitError{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "a connection into the pod from NAMESPACE/POD or an address")
	cmd.Flags().StringVar(&to, "to", "", "a connection out of the pod to NAMESPACE/POD or an address")
	cmd.Flags().StringVar(&port, "port", "", "destination PORT[/PROTOCOL] of the connection (TCP, UDP or SCTP; TCP when omitted)")
	return cmd
}

func addrsText(ips []netip.Addr) string {
	if len(ips) == 0 {
		return "(no address from tabby's IPAM)"
	}
	s := make([]string, len(ips))
	for i, ip := range ips {
		s[i] = ip.String()
	}
	return "(" + strings.Join(s, ", ") + ")"
}

func selectionText(keys []policy.Key) string {
	if len(keys) == 0 {
		return "open: no NetworkPolicy selects it"
	}
	s := make([]string, len(keys))
	for i, k := range keys {
		s[i] = k.String()
	}
	return "isolated, allowed only what these allow: " + strings.Join(s, ", ")
}

// adminText lists admin policies in evaluation order, with their priorities and what their
// status conditions say when it is not all well.
func adminText(in policy.Input, keys []policy.AdminKey) string {
	if len(keys) == 0 {
		return "none"
	}
	all := slices.Collect(maps.Values(in.Admin))
	s := make([]string, len(keys))
	for i, k := range keys {
		s[i] = k.String()
		p := in.Admin[k]
		if p == nil {
			continue
		}
		var notes []string
		if k.Kind != policy.KindBANP {
			notes = append(notes, fmt.Sprintf("priority %d", p.Priority))
		}
		conds := policy.AdminConditions(p, all)
		if c := meta.FindStatusCondition(conds, policy.ConditionAccepted); c != nil && c.Status != metav1.ConditionTrue {
			notes = append(notes, "not accepted: "+c.Reason)
		}
		if c := meta.FindStatusCondition(conds, policy.ConditionPriorityConflict); c != nil && c.Status == metav1.ConditionTrue {
			notes = append(notes, "priority shared")
		}
		if len(notes) > 0 {
			s[i] += " (" + strings.Join(notes, ", ") + ")"
		}
	}
	return strings.Join(s, ", then ")
}

// tierText names the tier that decided one side, as "[tier] ".
func tierText(s policy.Side) string {
	switch {
	case s.Tier != "":
		return "[" + s.Tier + "] "
	case s.Pod != nil:
		return "[default] "
	}
	return ""
}
