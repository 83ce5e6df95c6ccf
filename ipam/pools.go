package ipam

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/apis/validation"
	"github.com/tabbynet/tabby/internal/ipfamily"
)

// parsePools parses every pool, sorted by name; a malformed pool is skipped with its error kept
// for the "why no pool" message (the API server's validation makes this rare).
func parsePools(items []v1.IPPool) (pools []model.Pool, bad []string) {
	for i := range items {
		p, errs := validation.ParseIPPool(&items[i])
		if len(errs) > 0 {
			bad = append(bad, fmt.Sprintf("%s (%v)", items[i].Name, errs.ToAggregate()))
			continue
		}
		pools = append(pools, p)
	}
	sort.Slice(pools, func(i, j int) bool { return pools[i].Name < pools[j].Name })
	return pools, bad
}

// whyNot explains why the pool cannot serve a request of family fam on a node, or "" when it can.
func whyNot(p model.Pool, fam ipfamily.Family, labels map[string]string) string {
	switch {
	case !p.For(v1.IPPoolUseWorkload):
		return fmt.Sprintf("%s (allowedUses %v: not for pods)", p.Name, p.Uses)
	case p.Family() != fam:
		return fmt.Sprintf("%s (an %s pool: the request is for %s)", p.Name, p.Family(), fam)
	case !p.Matches(labels):
		return fmt.Sprintf("%s (nodeSelector %q does not match)", p.Name, p.NodeSelector)
	case p.Disabled:
		return fmt.Sprintf("%s (disabled)", p.Name)
	}
	return ""
}

// IPIPOverhead is what IPIP adds to a packet: the outer IPv4 header.
const IPIPOverhead = 20

// EncapOverhead is what the pool's encapsulation adds to its packets between nodes: IPIP's
// outer IPv4 header, or VXLAN's outer headers over the pool's own family (an IPv6 pool's VXLAN
// runs over the nodes' IPv6 addresses); 0 for a pool routed natively. CrossSubnet counts as
// encapsulated: some of the pool's traffic is. An address's MTU must leave room for it, or its
// largest packets would be fragmented or dropped in the tunnel.
func EncapOverhead(p model.Pool) int {
	switch {
	case p.IPIP():
		return IPIPOverhead
	case p.VXLAN() && p.Family() == ipfamily.IPv6:
		return v1.VXLANOverheadIPv6
	case p.VXLAN():
		return v1.VXLANOverhead
	}
	return 0
}

// poolFor finds the pool containing a block or address.
func poolFor(pools []model.Pool, p netip.Prefix) (model.Pool, bool) {
	for _, pl := range pools {
		if pl.CIDR.Overlaps(p) && pl.CIDR.Bits() <= p.Bits() {
			return pl, true
		}
	}
	return model.Pool{}, false
}

// choosePools picks the pools a request may allocate from: the explicit ones (the request's, else
// the pod's annotation, else its namespace's), narrowed to the enabled pools selecting the node;
// without explicit pools, every enabled pool selecting the node.
func (a *Allocator) choosePools(ctx context.Context, r Request) ([]model.Pool, error) {
	all, bad, err := a.pools(ctx, false)
	if err != nil {
		return nil, err
	}
	node, err := a.nodeLabels(ctx, r.Node)
	if err != nil {
		return nil, err
	}
	explicit, source := r.Pools, "the request"
	if len(explicit) == 0 && r.Namespace != "" && r.Pod != "" {
		explicit, source, err = a.annotatedPools(ctx, r.Namespace, r.Pod, r.family())
		if err != nil {
			return nil, err
		}
	}
	return selectPools(all, bad, r.family(), r.Node, node, explicit, source)
}

// selectPools is choosePools' decision, free of I/O: the pools of family fam.
func selectPools(all []model.Pool, bad []string, fam ipfamily.Family, nodeName string, labels map[string]string, explicit []string, source string) ([]model.Pool, error) {
	if len(explicit) == 0 {
		var out []model.Pool
		var why []string
		for _, p := range all {
			if w := whyNot(p, fam, labels); w != "" {
				why = append(why, w)
				continue
			}
			out = append(out, p)
		}
		if len(out) == 0 {
			why = append(why, bad...)
			if len(why) == 0 {
				return nil, &kindError{ErrNoPool, fmt.Sprintf("no IPPool matches node %s: there are no IPPools", nodeName)}
			}
			return nil, &kindError{ErrNoPool, fmt.Sprintf("no IPPool matches node %s (pools: %s)", nodeName, strings.Join(why, ", "))}
		}
		return out, nil
	}
	var out []model.Pool
	var why []string
	for _, want := range explicit {
		want = strings.TrimSpace(want)
		idx := slices.IndexFunc(all, func(p model.Pool) bool { return p.Name == want || p.CIDR.String() == want })
		if idx < 0 {
			why = append(why, fmt.Sprintf("%s (no such IPPool)", want))
			continue
		}
		p := all[idx]
		if w := whyNot(p, fam, labels); w != "" {
			why = append(why, w)
			continue
		}
		if !slices.ContainsFunc(out, func(q model.Pool) bool { return q.Name == p.Name }) {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w for node %s among those named by %s (pools: %s)", ErrNoPool, nodeName, source, strings.Join(why, ", "))
	}
	return out, nil
}

// annotatedPools reads the family's pools annotation (tabby.dev/ipv4pools, tabby.dev/ipv6pools)
// from the pod, else from its namespace.
func (a *Allocator) annotatedPools(ctx context.Context, namespace, name string, fam ipfamily.Family) ([]string, string, error) {
	key := v1.AnnotationIPv4Pools
	if fam == ipfamily.IPv6 {
		key = v1.AnnotationIPv6Pools
	}
	podAnn, err := a.podAnnotations(ctx, namespace, name)
	if err != nil {
		return nil, "", err
	}
	if v, ok := podAnn[key]; ok {
		src := fmt.Sprintf("pod %s/%s annotation %s", namespace, name, key)
		l, err := parsePoolList(v, src)
		return l, src, err
	}
	ann, err := a.namespaceAnnotations(ctx, namespace)
	if err != nil {
		return nil, "", err
	}
	if v, ok := ann[key]; ok {
		src := fmt.Sprintf("namespace %s annotation %s", namespace, key)
		l, err := parsePoolList(v, src)
		return l, src, err
	}
	return nil, "", nil
}

// podAnnotations asks the cache (Config.PodAnnotations) first, then the API server. A pod the
// API does not know (a runtime without Kubernetes, or a test) has no annotations.
func (a *Allocator) podAnnotations(ctx context.Context, namespace, name string) (map[string]string, error) {
	if a.cfg.PodAnnotations != nil {
		if ann, ok := a.cfg.PodAnnotations(namespace, name); ok {
			return ann, nil
		}
	}
	pod, err := a.store.GetPod(ctx, namespace, name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get pod %s/%s: %w", namespace, name, err)
	}
	return pod.Annotations, nil
}

func parsePoolList(v, src string) ([]string, error) {
	var l []string
	if err := json.Unmarshal([]byte(v), &l); err != nil {
		return nil, fmt.Errorf("%s: %q is not a JSON list of pool names or CIDRs: %v", src, v, err)
	}
	if len(l) == 0 {
		return nil, fmt.Errorf("%s: %q names no pool", src, v)
	}
	return l, nil
}
