// Package printer prints tabby objects as kubectl-style tables, YAML or JSON.
package printer

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/yaml"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/apis/validation"
	"github.com/tabbynet/tabby/tabbyctl/nodeview"
)

// Formats accepted by -o.
var Formats = []string{"table", "wide", "yaml", "json"}

// CheckFormat refuses an unknown -o value.
func CheckFormat(f string) error {
	for _, ok := range Formats {
		if f == ok {
			return nil
		}
	}
	return fmt.Errorf("-o: Unsupported value: %q: supported values: %s", f, strings.Join(Formats, ", "))
}

// Table writes aligned columns.
func Table(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// Context carries cluster facts some columns need (a node's inherited AS number).
type Context struct {
	DefaultASN uint32
}

// Objects prints objs (all of one kind) in format.
func Objects(w io.Writer, format string, objs []any, pc Context) error {
	switch format {
	case "yaml":
		for i, o := range objs {
			if i > 0 {
				fmt.Fprintln(w, "---")
			}
			b, err := yaml.Marshal(clean(o))
			if err != nil {
				return err
			}
			if _, err := w.Write(b); err != nil {
				return err
			}
		}
		return nil
	case "json":
		var v any
		if len(objs) == 1 {
			v = clean(objs[0])
		} else {
			items := make([]any, len(objs))
			for i, o := range objs {
				items[i] = clean(o)
			}
			v = map[string]any{"apiVersion": "v1", "kind": "List", "items": items}
		}
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	wide := format == "wide"
	var header []string
	var rows [][]string
	for _, o := range objs {
		h, r := row(o, wide, pc)
		header = h
		rows = append(rows, r)
	}
	if header == nil {
		return nil
	}
	return Table(w, header, rows)
}

// clean drops server bookkeeping that only adds noise to a file meant to be edited and applied.
func clean(o any) any {
	b, err := json.Marshal(o)
	if err != nil {
		return o
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return o
	}
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "managedFields")
		delete(md, "generation")
		if md["creationTimestamp"] == nil {
			delete(md, "creationTimestamp")
		}
	}
	return m
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func row(o any, wide bool, pc Context) ([]string, []string) {
	switch x := o.(type) {
	case *v1.IPPool:
		sel := x.Spec.NodeSelector
		if sel == "" {
			sel = "all()"
		}
		h := []string{"NAME", "CIDR", "SELECTOR"}
		r := []string{x.Name, x.Spec.CIDR, sel}
		if wide {
			// The defaults as IPAM applies them (a blockSize depends on the family); a pool the
			// API server should not have taken is shown as stored.
			bs, ipip, vxlan := strconv.Itoa(x.Spec.BlockSize), orDash(string(x.Spec.IPIPMode)), orDash(string(x.Spec.VXLANMode))
			if p, errs := validation.ParseIPPool(x); len(errs) == 0 {
				bs, ipip, vxlan = strconv.Itoa(p.BlockSize), string(p.IPIPMode), string(p.VXLANMode)
			}
			h = append(h, "NAT", "IPIPMODE", "VXLANMODE", "DISABLED", "BLOCKSIZE")
			r = append(r, strconv.FormatBool(x.Spec.NATOutgoing), ipip, vxlan, strconv.FormatBool(x.Spec.Disabled), bs)
		}
		return h, r
	case *v1.BGPPeer:
		peer := x.Spec.PeerIP
		if peer == "" {
			peer = "(selector) " + x.Spec.PeerSelector
		}
		node := x.Spec.Node
		switch {
		case node != "":
		case x.Spec.NodeSelector != "":
			node = "(selector) " + x.Spec.NodeSelector
		default:
			node = "(global)"
		}
		asn := "(node's)"
		if x.Spec.ASNumber != 0 {
			asn = strconv.FormatUint(uint64(x.Spec.ASNumber), 10)
		}
		h := []string{"NAME", "PEERIP", "NODE", "ASN"}
		r := []string{x.Name, peer, node, asn}
		if wide {
			pw := "-"
			if x.Spec.Password != nil && x.Spec.Password.SecretKeyRef != nil {
				pw = x.Spec.Password.SecretKeyRef.Name + "/" + x.Spec.Password.SecretKeyRef.Key
			}
			hop := "-"
			if x.Spec.EBGPMultihop != 0 {
				hop = strconv.Itoa(int(x.Spec.EBGPMultihop))
			}
			h = append(h, "PASSWORD", "KEEP-NEXT-HOP", "EBGP-MULTIHOP", "FILTERS")
			r = append(r, pw, strconv.FormatBool(x.Spec.KeepOriginalNextHop), hop, orDash(strings.Join(x.Spec.Filters, ",")))
		}
		return h, r
	case *v1.BGPFilter:
		// The number of rules in each list: the rules themselves are in -o yaml.
		return []string{"NAME", "IMPORTV4", "EXPORTV4", "IMPORTV6", "EXPORTV6"},
			[]string{x.Name, strconv.Itoa(len(x.Spec.ImportV4)), strconv.Itoa(len(x.Spec.ExportV4)), strconv.Itoa(len(x.Spec.ImportV6)), strconv.Itoa(len(x.Spec.ExportV6))}
	case *v1.BGPConfiguration:
		asn, mesh, port := strconv.Itoa(v1.DefaultASNumber), "true", strconv.Itoa(v1.DefaultListenPort)
		if x.Spec.ASNumber != nil {
			asn = strconv.FormatUint(uint64(*x.Spec.ASNumber), 10)
		}
		if x.Spec.NodeToNodeMeshEnabled != nil {
			mesh = strconv.FormatBool(*x.Spec.NodeToNodeMeshEnabled)
		}
		if x.Spec.ListenPort != nil {
			port = strconv.Itoa(int(*x.Spec.ListenPort))
		}
		h := []string{"NAME", "ASN", "MESH", "PORT", "LOGSEVERITY"}
		r := []string{x.Name, asn, mesh, port, orDash(string(x.Spec.LogSeverity))}
		if wide {
			var svc []string
			for _, c := range x.Spec.ServiceClusterIPs {
				svc = append(svc, c.CIDR)
			}
			for _, c := range x.Spec.ServiceExternalIPs {
				svc = append(svc, c.CIDR)
			}
			h = append(h, "SERVICE-CIDRS")
			r = append(r, orDash(strings.Join(svc, ",")))
		}
		return h, r
	case *v1.FelixConfiguration:
		// Unset fields as the agents apply them; an MTU of 0 is the uplink's minus the overhead.
		num := func(v *int, def string) string {
			if v == nil || *v == 0 {
				return def
			}
			return strconv.Itoa(*v)
		}
		s := x.Spec
		return []string{"NAME", "VNI", "PORT", "MTU", "MTUV6"},
			[]string{x.Name, num(s.VXLANVNI, strconv.Itoa(v1.DefaultVXLANVNI)), num(s.VXLANPort, strconv.Itoa(v1.DefaultVXLANPort)),
				num(s.VXLANMTU, fmt.Sprintf("(uplink-%d)", v1.VXLANOverhead)), num(s.VXLANMTUV6, fmt.Sprintf("(uplink-%d)", v1.VXLANOverheadIPv6))}
	case *nodeview.Resource:
		b := x.Spec.BGP
		if b == nil {
			b = &nodeview.BGPSpec{}
		}
		// An inherited AS number is shown in parentheses, as calicoctl does.
		asn := fmt.Sprintf("(%d)", pc.DefaultASN)
		if b.ASNumber != nil {
			asn = strconv.FormatUint(uint64(*b.ASNumber), 10)
		}
		return []string{"NAME", "ASN", "IPV4-ADDRESS", "IPV6-ADDRESS", "RR-CLUSTER-ID", "TUNNEL-ADDRESS"},
			[]string{x.Name, asn, orDash(b.IPv4Address), orDash(b.IPv6Address), orDash(b.RouteReflectorClusterID), orDash(b.IPv4IPIPTunnelAddr)}
	}
	return nil, nil
}
