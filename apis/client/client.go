// Package client is tabby's typed client for its CRDs and the few Kubernetes kinds tabby reads: a
// thin generic layer over client-go's REST client, with no discovery round trips, so a CNI binary
// or a CLI pays only for the requests it makes. Writes carry the object's resourceVersion: an
// Update is a compare-and-swap and a conflict comes back as a Conflict error
// (apierrors.IsConflict).
//
// It does not link client-go's clientset: that registers every API group of Kubernetes, and
// every tabby-node would carry the code and resident pages of all of them. Tests and tools that
// need other kinds build a clientset themselves.
package client

import (
	"context"
	"fmt"
	"os"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	anpv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"

	v1 "github.com/tabbynet/tabby/apis/v1"
)

// Scheme knows tabby's types (and nothing else).
var Scheme = runtime.NewScheme()

func init() {
	if err := v1.AddToScheme(Scheme); err != nil {
		panic(err)
	}
	metav1.AddToGroupVersion(Scheme, metav1.SchemeGroupVersion)
}

// Client reaches tabby's resources and the Kubernetes kinds tabby reads.
type Client struct {
	REST rest.Interface // tabby's CRDs
	// Core is the core API (/api/v1), Networking networking.k8s.io/v1; both speak protobuf, as
	// client-go's generated clients do.
	Core, Networking rest.Interface
	// Discovery is discovery.k8s.io/v1 (EndpointSlices, to find tabby-typha).
	Discovery rest.Interface
	// Coordination is coordination.k8s.io/v1 (Leases).
	Coordination rest.Interface
	// Policy is policy.networking.k8s.io/v1alpha1 (AdminNetworkPolicies), PolicyBeta its
	// v1beta1 (ClusterNetworkPolicies); JSON as every CRD.
	Policy, PolicyBeta rest.Interface
	// fan, when set, is where informers of cluster-wide kinds list and watch first.
	fan *Fanout
	// timeout bounds each request but a watch's.
	timeout time.Duration
	// noRetry: a request that meets a closed connection fails at once, rather than after
	// client-go's ten retries a second apart (tabby-typha's: the caller moves on).
	noRetry bool
}

// LoadConfig finds a cluster the way kubectl does: an explicit kubeconfig path, else $KUBECONFIG,
// else ~/.kube/config, else the in-cluster service account; context overrides the current one.
func LoadConfig(kubeconfig, context string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: context}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if clientcmd.IsEmptyConfig(err) {
		// client-go's own words point at KUBERNETES_MASTER, which nothing reads any more.
		return nil, fmt.Errorf("no cluster to talk to: looked for --kubeconfig, $KUBECONFIG (%q), %s and an in-cluster service account, and found none; point at a cluster with --kubeconfig FILE or KUBECONFIG=FILE",
			os.Getenv("KUBECONFIG"), clientcmd.RecommendedHomeFile)
	}
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	return cfg, nil
}

// New builds a client. QPS limits are raised: tabby's callers are agents and CNI invocations
// that must not queue behind client-side throttling (the API server's own fairness still applies).
func New(cfg *rest.Config) (*Client, error) {
	c := rest.CopyConfig(cfg)
	if c.QPS == 0 {
		c.QPS, c.Burst = 200, 400
	}
	// The config's Timeout would be the HTTP client's, which also cuts every watch: each informer
	// of every agent would watch again at every timeout. It bounds each request but a watch
	// instead.
	timeout := c.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	c.Timeout = 0
	restClient, err := restClientFor(c, &v1.SchemeGroupVersion, "/apis", runtime.ContentTypeJSON, Scheme)
	if err != nil {
		return nil, fmt.Errorf("tabby REST client: %w", err)
	}
	core, err := restClientFor(c, &corev1.SchemeGroupVersion, "/api", runtime.ContentTypeProtobuf, KubeScheme)
	if err != nil {
		return nil, fmt.Errorf("core API client: %w", err)
	}
	networking, err := restClientFor(c, &networkingv1.SchemeGroupVersion, "/apis", runtime.ContentTypeProtobuf, KubeScheme)
	if err != nil {
		return nil, fmt.Errorf("networking API client: %w", err)
	}
	discovery, err := restClientFor(c, &discoveryv1.SchemeGroupVersion, "/apis", runtime.ContentTypeProtobuf, KubeScheme)
	if err != nil {
		return nil, fmt.Errorf("discovery API client: %w", err)
	}
	coordination, err := restClientFor(c, &coordinationv1.SchemeGroupVersion, "/apis", runtime.ContentTypeProtobuf, KubeScheme)
	if err != nil {
		return nil, fmt.Errorf("coordination API client: %w", err)
	}
	pol, err := restClientFor(c, &schema.GroupVersion{Group: anpv1alpha1.GroupName, Version: "v1alpha1"}, "/apis", runtime.ContentTypeJSON, KubeScheme)
	if err != nil {
		return nil, fmt.Errorf("network-policy-api client: %w", err)
	}
	polBeta, err := restClientFor(c, &schema.GroupVersion{Group: anpv1alpha1.GroupName, Version: "v1beta1"}, "/apis", runtime.ContentTypeJSON, KubeScheme)
	if err != nil {
		return nil, fmt.Errorf("network-policy-api v1beta1 client: %w", err)
	}
	return &Client{REST: restClient, Core: core, Networking: networking, Discovery: discovery, Coordination: coordination, Policy: pol, PolicyBeta: polBeta, timeout: timeout}, nil
}

func restClientFor(c *rest.Config, gv *schema.GroupVersion, apiPath, contentType string, scheme *runtime.Scheme) (*rest.RESTClient, error) {
	rc := rest.CopyConfig(c)
	rc.GroupVersion = gv
	rc.APIPath = apiPath
	rc.ContentType = contentType
	if contentType == runtime.ContentTypeProtobuf {
		rc.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	}
	rc.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	if rc.UserAgent == "" {
		rc.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	return rest.RESTClientFor(rc)
}

// Object is an API object: a tabby resource or a Kubernetes kind.
type Object interface {
	runtime.Object
	metav1.Object
}

// Resource is typed access to one kind, in one namespace (every namespace, or a cluster-scoped
// kind, when namespace is empty).
type Resource[T Object, L runtime.Object] struct {
	rest      rest.Interface
	plural    string
	newObj    func() T
	newList   func() L
	namespace string
	custom    bool // one of tabby's CRDs (JSON), not a core resource (protobuf)
	cl        *Client
}

func (c *Client) IPPools() Resource[*v1.IPPool, *v1.IPPoolList] {
	return Resource[*v1.IPPool, *v1.IPPoolList]{c.REST, v1.ResourceIPPools, func() *v1.IPPool { return &v1.IPPool{} }, func() *v1.IPPoolList { return &v1.IPPoolList{} }, "", true, c}
}

func (c *Client) BGPConfigurations() Resource[*v1.BGPConfiguration, *v1.BGPConfigurationList] {
	return Resource[*v1.BGPConfiguration, *v1.BGPConfigurationList]{c.REST, v1.ResourceBGPConfigurations, func() *v1.BGPConfiguration { return &v1.BGPConfiguration{} }, func() *v1.BGPConfigurationList { return &v1.BGPConfigurationList{} }, "", true, c}
}

// FelixConfigurations are the dataplane's settings (a singleton named default).
func (c *Client) FelixConfigurations() Resource[*v1.FelixConfiguration, *v1.FelixConfigurationList] {
	return Resource[*v1.FelixConfiguration, *v1.FelixConfigurationList]{c.REST, v1.ResourceFelixConfigurations, func() *v1.FelixConfiguration { return &v1.FelixConfiguration{} }, func() *v1.FelixConfigurationList { return &v1.FelixConfigurationList{} }, "", true, c}
}

func (c *Client) BGPPeers() Resource[*v1.BGPPeer, *v1.BGPPeerList] {
	return Resource[*v1.BGPPeer, *v1.BGPPeerList]{c.REST, v1.ResourceBGPPeers, func() *v1.BGPPeer { return &v1.BGPPeer{} }, func() *v1.BGPPeerList { return &v1.BGPPeerList{} }, "", true, c}
}

// BGPFilters are the route filters BGPPeers refer to.
func (c *Client) BGPFilters() Resource[*v1.BGPFilter, *v1.BGPFilterList] {
	return Resource[*v1.BGPFilter, *v1.BGPFilterList]{c.REST, v1.ResourceBGPFilters, func() *v1.BGPFilter { return &v1.BGPFilter{} }, func() *v1.BGPFilterList { return &v1.BGPFilterList{} }, "", true, c}
}

func (c *Client) IPAMBlocks() Resource[*v1.IPAMBlock, *v1.IPAMBlockList] {
	return Resource[*v1.IPAMBlock, *v1.IPAMBlockList]{c.REST, v1.ResourceIPAMBlocks, func() *v1.IPAMBlock { return &v1.IPAMBlock{} }, func() *v1.IPAMBlockList { return &v1.IPAMBlockList{} }, "", true, c}
}

func (c *Client) BlockAffinities() Resource[*v1.BlockAffinity, *v1.BlockAffinityList] {
	return Resource[*v1.BlockAffinity, *v1.BlockAffinityList]{c.REST, v1.ResourceBlockAffinities, func() *v1.BlockAffinity { return &v1.BlockAffinity{} }, func() *v1.BlockAffinityList { return &v1.BlockAffinityList{} }, "", true, c}
}

func (c *Client) IPAMHandles() Resource[*v1.IPAMHandle, *v1.IPAMHandleList] {
	return Resource[*v1.IPAMHandle, *v1.IPAMHandleList]{c.REST, v1.ResourceIPAMHandles, func() *v1.IPAMHandle { return &v1.IPAMHandle{} }, func() *v1.IPAMHandleList { return &v1.IPAMHandleList{} }, "", true, c}
}

// RequestTimeout bounds a request made on REST, Core, Networking or Discovery directly (the
// typed methods apply it themselves): Request.Timeout(c.RequestTimeout()).
func (c *Client) RequestTimeout() time.Duration { return c.timeout }

// on points req at the resource (and its namespace: the API server refuses a create naming the
// empty one).
func (r Resource[T, L]) on(req *rest.Request) *rest.Request {
	if r.namespace != "" {
		req = req.Namespace(r.namespace)
	}
	if r.cl.noRetry {
		req = req.MaxRetries(0)
	}
	return req.Resource(r.plural)
}

// call is on, with the client's timeout: every request but a watch.
func (r Resource[T, L]) call(req *rest.Request) *rest.Request {
	return r.on(req).Timeout(r.cl.timeout)
}

// Get fetches one object by name.
func (r Resource[T, L]) Get(ctx context.Context, name string) (T, error) {
	out := r.newObj()
	err := r.call(r.rest.Get()).Name(name).Do(ctx).Into(out)
	return out, err
}

// List lists objects.
func (r Resource[T, L]) List(ctx context.Context, opts metav1.ListOptions) (L, error) {
	out := r.newList()
	err := r.call(r.rest.Get()).VersionedParams(&opts, metav1.ParameterCodec).Do(ctx).Into(out)
	return out, err
}

// Create creates obj; AlreadyExists when the name is taken.
func (r Resource[T, L]) Create(ctx context.Context, obj T) (T, error) {
	out := r.newObj()
	err := r.call(r.rest.Post()).Body(obj).Do(ctx).Into(out)
	return out, err
}

// Update replaces obj if its resourceVersion is still current (Conflict otherwise).
func (r Resource[T, L]) Update(ctx context.Context, obj T) (T, error) {
	out := r.newObj()
	err := r.call(r.rest.Put()).Name(obj.GetName()).Body(obj).Do(ctx).Into(out)
	return out, err
}

// Patch applies a patch of the given type.
func (r Resource[T, L]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte) (T, error) {
	out := r.newObj()
	err := r.call(r.rest.Patch(pt)).Name(name).Body(data).Do(ctx).Into(out)
	return out, err
}

// Delete deletes by name; opts may carry a resourceVersion precondition.
func (r Resource[T, L]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return r.call(r.rest.Delete()).Name(name).Body(&opts).Do(ctx).Error()
}

// Watch watches the kind.
func (r Resource[T, L]) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return r.on(r.rest.Get()).VersionedParams(&opts, metav1.ParameterCodec).Watch(ctx)
}

// ListWatch adapts the resource for client-go informers.
func (r Resource[T, L]) ListWatch() *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return r.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return r.Watch(ctx, opts)
		},
	}
}

// Informer is an informer of the resource with no indexes (a namespace index is a set of keys per
// namespace, held in every agent's heap for every pod of the cluster, and nothing in tabby looks
// objects up by namespace); transform, when not nil, trims each object before it is stored.
func Informer[T Object, L runtime.Object](r Resource[T, L], transform cache.TransformFunc) cache.SharedIndexInformer {
	return newInformer(r.informerSource(), r.newObj(), transform)
}

// DirectInformer is Informer watching the API server itself, never tabby-typha: for a reader of
// whole objects (a fan-out's copies are trimmed to what the agents read).
func DirectInformer[T Object, L runtime.Object](r Resource[T, L], transform cache.TransformFunc) cache.SharedIndexInformer {
	return newInformer(r.DirectSource(), r.newObj(), transform)
}

func newInformer(source cache.ListerWatcher, obj runtime.Object, transform cache.TransformFunc) cache.SharedIndexInformer {
	inf := cache.NewSharedIndexInformer(source, obj, 0, cache.Indexers{})
	if transform != nil {
		// SetTransform fails only on a started informer.
		_ = inf.SetTransform(transform)
	}
	return inf
}

// listWatch is a ListWatch that has the reflector list and then watch, rather than ask for a
// streaming list (WatchList, on by default in client-go's informers). The API server ends a
// streaming list of a custom resource late, so tabby-node's caches synced, and its BGP sessions
// started, late; a list and a watch sync them at once. The core resources keep streaming: a
// large cluster's pods decoded as one list would multiply tabby-node's memory.
type listWatch struct{ *cache.ListWatch }

func (listWatch) IsWatchListSemanticsUnSupported() bool { return true }

// informerSource is what an informer of the resource lists and watches with: through
// tabby-typha first when the client has one and it serves the resource.
func (r Resource[T, L]) informerSource() cache.ListerWatcher {
	if fan := r.cl.fan; fan != nil && r.namespace == "" && FannedOut[r.plural] {
		typha := r
		typha.rest, typha.cl = fan.route[r.rest], fan.typha
		return &failover{fan: fan, typha: typha.ListWatch(), direct: r.ListWatch(), noStream: r.custom, resource: r.plural}
	}
	return r.DirectSource()
}

// DirectSource is what an informer of the resource lists and watches the API server with.
func (r Resource[T, L]) DirectSource() cache.ListerWatcher {
	if r.custom {
		return listWatch{r.ListWatch()}
	}
	return r.ListWatch()
}

// Plural is the resource's name in its API path.
func (r Resource[T, L]) Plural() string { return r.plural }

// NewObject returns an empty object of the kind, for informers.
func (r Resource[T, L]) NewObject() T { return r.newObj() }
