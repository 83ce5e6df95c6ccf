package typha

import (
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/tabbynet/tabby/apis/client"
)

// source is one resource tabby-typha watches on the API server and serves.
type source struct {
	resource schema.GroupVersionResource
	kind     schema.GroupVersionKind
	lw       cache.ListerWatcher
	obj      runtime.Object
}

// sources are the kinds of client.FannedOut, watched through c.
func sources(c *client.Client) ([]source, error) {
	var out []source
	for _, s := range []func() (source, error){
		func() (source, error) { return sourceOf(c.Nodes()) },
		func() (source, error) { return sourceOf(c.Pods("")) },
		func() (source, error) { return sourceOf(c.Namespaces()) },
		func() (source, error) { return sourceOf(c.NetworkPolicies("")) },
		func() (source, error) { return sourceOf(c.Services("")) },
		func() (source, error) { return sourceOf(c.EndpointSlices("")) },
		func() (source, error) { return sourceOf(c.AdminNetworkPolicies()) },
		func() (source, error) { return sourceOf(c.BaselineAdminNetworkPolicies()) },
		func() (source, error) { return sourceOf(c.ClusterNetworkPolicies()) },
		func() (source, error) { return sourceOf(c.IPPools()) },
		func() (source, error) { return sourceOf(c.IPAMBlocks()) },
		func() (source, error) { return sourceOf(c.BGPConfigurations()) },
		func() (source, error) { return sourceOf(c.BGPPeers()) },
		func() (source, error) { return sourceOf(c.BGPFilters()) },
		func() (source, error) { return sourceOf(c.FelixConfigurations()) },
	} {
		src, err := s()
		if err != nil {
			return nil, err
		}
		out = append(out, src)
	}
	return out, nil
}

func sourceOf[T client.Object, L runtime.Object](r client.Resource[T, L]) (source, error) {
	obj := r.NewObject()
	var kinds []schema.GroupVersionKind
	for _, s := range []*runtime.Scheme{client.Scheme, client.KubeScheme} {
		if k, _, err := s.ObjectKinds(obj); err == nil {
			kinds = k
			break
		}
	}
	if len(kinds) == 0 {
		return source{}, fmt.Errorf("no kind for %s", reflect.TypeOf(obj))
	}
	return source{
		resource: kinds[0].GroupVersion().WithResource(r.Plural()),
		kind:     kinds[0],
		lw:       r.DirectSource(),
		obj:      obj,
	}, nil
}
