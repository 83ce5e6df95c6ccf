package tabbyctl

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tabbynet/tabby/apis/client"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/tabbyctl/manifest"
	"github.com/tabbynet/tabby/tabbyctl/nodeview"
)

// resource is what the generic commands need of one kind.
type resource struct {
	kind    string
	names   []string // accepted on the command line; the first is the canonical one
	newObj  func() manifest.Object
	get     func(ctx context.Context, c *client.Client, name string) (manifest.Object, error)
	list    func(ctx context.Context, c *client.Client) ([]manifest.Object, error)
	create  func(ctx context.Context, c *client.Client, obj manifest.Object) error
	update  func(ctx context.Context, c *client.Client, obj manifest.Object, replace bool) error
	delete  func(ctx context.Context, c *client.Client, name string) error
	isLocal bool // the Node view: writes are patches of an existing Kubernetes Node
}

func crd[T client.Object, L runtime.Object](kind string, names []string, res func(*client.Client) client.Resource[T, L], items func(L) []T) *resource {
	return &resource{
		kind:   kind,
		names:  names,
		newObj: func() manifest.Object { return res(&client.Client{}).NewObject() },
		get: func(ctx context.Context, c *client.Client, name string) (manifest.Object, error) {
			return res(c).Get(ctx, name)
		},
		list: func(ctx context.Context, c *client.Client) ([]manifest.Object, error) {
			l, err := res(c).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			var out []manifest.Object
			for _, o := range items(l) {
				out = append(out, o)
			}
			return out, nil
		},
		create: func(ctx context.Context, c *client.Client, obj manifest.Object) error {
			t := obj.(T)
			t.SetResourceVersion("")
			_, err := res(c).Create(ctx, t)
			return err
		},
		update: func(ctx context.Context, c *client.Client, obj manifest.Object, _ bool) error {
			_, err := res(c).Update(ctx, obj.(T))
			return err
		},
		delete: func(ctx context.Context, c *client.Client, name string) error {
			return res(c).Delete(ctx, name, metav1.DeleteOptions{})
		},
	}
}

func ptrs[T any](s []T) []*T {
	out := make([]*T, len(s))
	for i := range s {
		out[i] = &s[i]
	}
	return out
}

var resources = []*resource{
	crd("IPPool", []string{"ippool", "ippools", "pool", "pools"}, (*client.Client).IPPools, func(l *v1.IPPoolList) []*v1.IPPool { return ptrs(l.Items) }),
	crd("BGPPeer", []string{"bgppeer", "bgppeers", "bgpp", "bp"}, (*client.Client).BGPPeers, func(l *v1.BGPPeerList) []*v1.BGPPeer { return ptrs(l.Items) }),
	crd("BGPFilter", []string{"bgpfilter", "bgpfilters", "bgpf"}, (*client.Client).BGPFilters, func(l *v1.BGPFilterList) []*v1.BGPFilter { return ptrs(l.Items) }),
	crd("BGPConfiguration", []string{"bgpconfig", "bgpconfigs", "bgpconfiguration", "bgpconfigurations"}, (*client.Client).BGPConfigurations, func(l *v1.BGPConfigurationList) []*v1.BGPConfiguration { return ptrs(l.Items) }),
	crd("FelixConfiguration", []string{"felixconfig", "felixconfigs", "felixconfiguration", "felixconfigurations"}, (*client.Client).FelixConfigurations, func(l *v1.FelixConfigurationList) []*v1.FelixConfiguration { return ptrs(l.Items) }),
	nodeResource(),
}

func nodeResource() *resource {
	patch := func(ctx context.Context, c *client.Client, name string, body []byte) error {
		_, err := c.Nodes().Patch(ctx, name, types.MergePatchType, body)
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("no Kubernetes Node %q: tabbyctl sets tabby's settings on existing Nodes only: %w", name, err)
		}
		return err
	}
	write := func(ctx context.Context, c *client.Client, obj manifest.Object, replace bool) error {
		n := obj.(*nodeview.Resource)
		body, err := n.MergePatch(replace, nil)
		if err != nil {
			return err
		}
		return patch(ctx, c, n.Name, body)
	}
	return &resource{
		kind:    nodeview.Kind,
		names:   []string{"node", "nodes", "no"},
		newObj:  func() manifest.Object { return &nodeview.Resource{} },
		isLocal: true,
		get: func(ctx context.Context, c *client.Client, name string) (manifest.Object, error) {
			k, err := c.Nodes().Get(ctx, name)
			if err != nil {
				return nil, err
			}
			return nodeview.FromKube(k), nil
		},
		list: func(ctx context.Context, c *client.Client) ([]manifest.Object, error) {
			l, err := c.Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			var out []manifest.Object
			for i := range l.Items {
				out = append(out, nodeview.FromKube(&l.Items[i]))
			}
			return out, nil
		},
		// A tabby Node exists whenever the Kubernetes Node does: create sets the settings like apply.
		create: func(ctx context.Context, c *client.Client, obj manifest.Object) error {
			return write(ctx, c, obj, false)
		},
		update: write,
		delete: func(ctx context.Context, c *client.Client, name string) error {
			return patch(ctx, c, name, nodeview.RemovePatch())
		},
	}
}

func lookupResource(name string) (*resource, error) {
	n := strings.ToLower(name)
	for _, r := range resources {
		if strings.EqualFold(r.kind, n) {
			return r, nil
		}
		for _, alias := range r.names {
			if alias == n {
				return r, nil
			}
		}
	}
	var known []string
	for _, r := range resources {
		known = append(known, r.names[0])
	}
	return nil, fmt.Errorf("unknown resource type %q: one of %s", name, strings.Join(known, ", "))
}

func resourceOfKind(kind string) *resource {
	for _, r := range resources {
		if r.kind == kind {
			return r
		}
	}
	return nil
}

// toList converts objects for the printer, sorted by name.
func toList(objs []manifest.Object) []any {
	sort.Slice(objs, func(i, j int) bool { return objs[i].GetName() < objs[j].GetName() })
	out := make([]any, len(objs))
	for i, o := range objs {
		setTypeMeta(o)
		out[i] = o
	}
	return out
}

// setTypeMeta fills apiVersion/kind, which the REST client leaves empty on decoded objects, so
// `-o yaml` output can be applied again.
func setTypeMeta(o manifest.Object) {
	kinds, _, err := client.Scheme.ObjectKinds(o)
	if err == nil && len(kinds) > 0 {
		o.GetObjectKind().SetGroupVersionKind(kinds[0])
	}
}

// mergePatch applies an RFC 7386 JSON merge patch to doc.
func mergePatch(doc, patch []byte) ([]byte, error) {
	var d, p any
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(patch, &p); err != nil {
		return nil, fmt.Errorf("patch is not a JSON or YAML object: %w", err)
	}
	if _, ok := p.(map[string]any); !ok {
		return nil, fmt.Errorf("patch is not a JSON or YAML object")
	}
	return json.Marshal(mergeValue(d, p))
}

func mergeValue(d, p any) any {
	pm, ok := p.(map[string]any)
	if !ok {
		return p
	}
	dm, ok := d.(map[string]any)
	if !ok {
		dm = map[string]any{}
	}
	for k, v := range pm {
		if v == nil {
			delete(dm, k)
			continue
		}
		dm[k] = mergeValue(dm[k], v)
	}
	return dm
}
