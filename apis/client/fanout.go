package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// FannedOut is what tabby-typha serves, by resource: the cluster-wide collections every
// tabby-node watches. An agent's informers of these list and watch through tabby-typha.
var FannedOut = map[string]bool{
	"nodes": true, "pods": true, "namespaces": true, "networkpolicies": true, "services": true, "endpointslices": true,
	"ippools": true, "ipamblocks": true, "bgpconfigurations": true, "bgppeers": true, "bgpfilters": true, "felixconfigurations": true,
	"adminnetworkpolicies": true, "baselineadminnetworkpolicies": true, "clusternetworkpolicies": true,
}

// DefaultRetryAfter is FanoutConfig.RetryAfter when it is zero.
const DefaultRetryAfter = 30 * time.Second

// FanoutConfig says how to reach tabby-typha.
type FanoutConfig struct {
	// Endpoints lists the addresses (host:port) of the replicas; each connection dials one at
	// random, another when it fails.
	Endpoints func(ctx context.Context) ([]string, error)
	// CAFile verifies tabby-typha's certificate, issued to ServerName.
	CAFile, ServerName string
	// RetryAfter is how long the API server is used directly after tabby-typha failed (0:
	// DefaultRetryAfter),
	// and how often (and up to half again) tabby-typha is asked meanwhile.
	RetryAfter time.Duration
	Logger     *slog.Logger
}

// Fanout sends an agent's informers of the FannedOut kinds to tabby-typha, and to the API server
// while no replica answers. Both speak the API server's list and watch with its resource
// versions, so an informer moves between them without listing again.
type Fanout struct {
	typha      *Client
	route      map[rest.Interface]rest.Interface // the API server's client of a group → tabby-typha's
	retryAfter time.Duration
	log        *slog.Logger
	now        func() time.Time

	mu        sync.Mutex
	downUntil time.Time
	down      bool
	// onTypha: by resource, whether its informer's last list or watch went through tabby-typha.
	onTypha map[string]bool
	// direct: the watches on the API server, ended when tabby-typha answers again; probing while
	// a goroutine asks it.
	direct  map[*directWatch]struct{}
	probing bool
	// probe is a request to tabby-typha that proves it serves this agent (a small list).
	probe func(context.Context) error
}

// WithFanout returns a client whose informers of the FannedOut kinds go through tabby-typha
// first. The agent's own bearer token (its service account's) authenticates it there.
func (c *Client) WithFanout(api *rest.Config, cfg FanoutConfig) (*Client, error) {
	if api.BearerToken == "" && api.BearerTokenFile == "" {
		return nil, fmt.Errorf("tabby-typha: the API server's config has no bearer token to present (a service account's)")
	}
	if cfg.ServerName == "" {
		return nil, fmt.Errorf("tabby-typha: no server name to verify its certificate against")
	}
	if cfg.RetryAfter == 0 {
		cfg.RetryAfter = DefaultRetryAfter
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	tc := &rest.Config{
		// Host names the certificate; Dial picks the replica.
		Host:            "https://" + cfg.ServerName,
		BearerToken:     api.BearerToken,
		BearerTokenFile: api.BearerTokenFile,
		TLSClientConfig: rest.TLSClientConfig{CAFile: cfg.CAFile, ServerName: cfg.ServerName},
		UserAgent:       api.UserAgent,
		QPS:             api.QPS, Burst: api.Burst,
		Dial: dialAny(cfg.Endpoints),
	}
	t, err := New(tc)
	if err != nil {
		return nil, fmt.Errorf("tabby-typha client: %w", err)
	}
	f := &Fanout{
		typha:      t,
		route:      map[rest.Interface]rest.Interface{c.REST: t.REST, c.Core: t.Core, c.Networking: t.Networking, c.Discovery: t.Discovery, c.Policy: t.Policy, c.PolicyBeta: t.PolicyBeta},
		retryAfter: cfg.RetryAfter, log: cfg.Logger, now: time.Now, onTypha: map[string]bool{},
		probe: func(ctx context.Context) error {
			_, err := t.BGPConfigurations().List(ctx, metav1.ListOptions{})
			return err
		},
	}
	out := *c
	out.fan = f
	return &out, nil
}

// dialAny dials one of the endpoints, in random order, each for at most two seconds.
func dialAny(endpoints func(context.Context) ([]string, error)) func(ctx context.Context, network, _ string) (net.Conn, error) {
	d := &net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}
	return func(ctx context.Context, network, _ string) (net.Conn, error) {
		addrs, err := endpoints(ctx)
		if err != nil {
			return nil, fmt.Errorf("find tabby-typha: %w", err)
		}
		if len(addrs) == 0 {
			return nil, errors.New("find tabby-typha: no ready endpoint")
		}
		var errs []error
		for _, i := range rand.Perm(len(addrs)) {
			conn, err := d.DialContext(ctx, network, addrs[i])
			if err == nil {
				return conn, nil
			}
			errs = append(errs, err)
		}
		return nil, errors.Join(errs...)
	}
}

// StaticEndpoints is a fixed list of replicas.
func StaticEndpoints(addrs []string) func(context.Context) ([]string, error) {
	return func(context.Context) ([]string, error) { return addrs, nil }
}

// ServiceEndpoints finds the ready replicas behind a Service from its EndpointSlices, on the API
// server: an agent needs neither cluster DNS nor a service proxy (both may need the pod network
// it is bringing up) to reach tabby-typha.
func (c *Client) ServiceEndpoints(namespace, service, port string) func(context.Context) ([]string, error) {
	return func(ctx context.Context) ([]string, error) {
		list := &discoveryv1.EndpointSliceList{}
		opts := metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + service}
		err := c.Discovery.Get().Namespace(namespace).Resource("endpointslices").VersionedParams(&opts, metav1.ParameterCodec).Timeout(c.timeout).Do(ctx).Into(list)
		if err != nil {
			return nil, fmt.Errorf("endpointslices of %s/%s: %w", namespace, service, err)
		}
		var out []string
		for _, s := range list.Items {
			var p int32
			for _, sp := range s.Ports {
				if sp.Port != nil && (sp.Name != nil && *sp.Name == port || len(s.Ports) == 1) {
					p = *sp.Port
				}
			}
			if p == 0 {
				continue
			}
			for _, e := range s.Endpoints {
				if e.Conditions.Ready != nil && !*e.Conditions.Ready {
					continue
				}
				for _, a := range e.Addresses {
					out = append(out, net.JoinHostPort(a, fmt.Sprint(p)))
				}
			}
		}
		return out, nil
	}
}

// Fanout is the client's fan-out, nil when it has none.
func (c *Client) Fanout() *Fanout { return c.fan }

// ViaTypha tells whether every informer's watch goes through tabby-typha now (false: one or more
// is on the API server, or none has started).
func (f *Fanout) ViaTypha() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, on := range f.onTypha {
		if !on {
			return false
		}
	}
	return len(f.onTypha) > 0
}

// tryTypha tells whether the next list or watch should try tabby-typha: not within RetryAfter of
// a failure.
func (f *Fanout) tryTypha() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.down || f.now().After(f.downUntil)
}

// used records where resource's informer now lists and watches.
func (f *Fanout) used(resource string, typha bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if typha && f.down {
		f.log.Info("tabby-typha answers again", "resource", resource)
		f.down = false
	}
	f.onTypha[resource] = typha
}

// failed records a failure of tabby-typha; false when err is the caller's own (its context ended)
// or part of the watch protocol (410: the informer lists again, through tabby-typha).
func (f *Fanout) failed(ctx context.Context, resource string, err error) bool {
	if ctx.Err() != nil || apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.down || f.now().After(f.downUntil) {
		f.log.Warn("tabby-typha unusable: listing and watching the API server directly for a while", "resource", resource, "for", f.retryAfter, "err", err)
	}
	f.down, f.downUntil = true, f.now().Add(f.retryAfter)
	return true
}

// failover lists and watches one resource through tabby-typha, or the API server while it fails.
type failover struct {
	fan           *Fanout
	typha, direct *cache.ListWatch
	noStream      bool
	resource      string
}

func (l *failover) IsWatchListSemanticsUnSupported() bool { return l.noStream }

func (l *failover) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	return either(l, ctx, opts, l.typha.ListWithContext, l.direct.ListWithContext)
}

func (l *failover) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return either(l, ctx, opts, l.typha.WatchWithContext, func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		w, err := l.direct.WatchWithContext(ctx, opts)
		if err != nil {
			return w, err
		}
		return l.fan.untilTyphaAnswers(w, opts.SendInitialEvents != nil && *opts.SendInitialEvents), nil
	})
}

// either calls typha, or direct when tabby-typha is out for a while or fails now.
func either[T any](l *failover, ctx context.Context, opts metav1.ListOptions, typha, direct func(context.Context, metav1.ListOptions) (T, error)) (T, error) {
	if l.fan.tryTypha() {
		out, err := typha(ctx, opts)
		var status apierrors.APIStatus
		if err != nil && !errors.As(err, &status) && ctx.Err() == nil {
			// A connection the replica closed (at its age, or as it stopped) fails the first
			// request made on it; the next dials a replica afresh.
			out, err = typha(ctx, opts)
		}
		if err == nil {
			l.fan.used(l.resource, true)
			return out, nil
		}
		if !l.fan.failed(ctx, l.resource, err) {
			return out, err
		}
	}
	out, err := direct(ctx, opts)
	if err == nil {
		l.fan.used(l.resource, false)
	}
	return out, err
}

// The reflector asks for these too (older callers).
func (l *failover) List(opts metav1.ListOptions) (runtime.Object, error) {
	return l.ListWithContext(context.Background(), opts)
}

func (l *failover) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return l.WatchWithContext(context.Background(), opts)
}

// directWatch is a watch on the API server that ends when tabby-typha answers again.
type directWatch struct {
	watch.Interface
	fan *Fanout
	// listed is closed once the informer has its whole list: at once for a watch, at the
	// initial-events-end bookmark for a streaming list, which goes on as the informer's watch.
	// Cut before that, a streaming list makes its informer list again.
	listed chan struct{}
	// out relays a streaming list's events to spot that bookmark; nil for a watch.
	out  chan watch.Event
	done chan struct{}
	once sync.Once
}

func (w *directWatch) ResultChan() <-chan watch.Event {
	if w.out != nil {
		return w.out
	}
	return w.Interface.ResultChan()
}

func (w *directWatch) Stop() {
	w.once.Do(func() {
		w.fan.mu.Lock()
		delete(w.fan.direct, w)
		w.fan.mu.Unlock()
		close(w.done)
	})
	w.Interface.Stop()
}

// relay passes a streaming list's events on and closes listed after its initial-events-end
// bookmark.
func (w *directWatch) relay() {
	defer close(w.out)
	in := w.Interface.ResultChan()
	listed := false
	for {
		var ev watch.Event
		var ok bool
		select {
		case ev, ok = <-in:
			if !ok {
				return
			}
		case <-w.done:
			return
		}
		select {
		case w.out <- ev:
		case <-w.done:
			return
		}
		if !listed && ev.Type == watch.Bookmark && initialEventsEnd(ev.Object) {
			listed = true
			close(w.listed)
		}
	}
}

func initialEventsEnd(obj runtime.Object) bool {
	m, err := meta.Accessor(obj)
	return err == nil && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true"
}

// cutWhenListed ends the watch, after its list and within a sixth of RetryAfter, so that its
// informer watches again through tabby-typha at its resourceVersion.
func (w *directWatch) cutWhenListed(jitter time.Duration) {
	select {
	case <-w.listed:
	case <-w.done:
		return
	}
	time.AfterFunc(rand.N(jitter+1), w.Stop)
}

// untilTyphaAnswers keeps w, a watch on the API server (a streaming list when streaming), until
// tabby-typha answers again, then ends it: its informer watches again, through tabby-typha, at its
// resourceVersion. Otherwise every agent stayed on the API server, after an outage of every
// replica, until its watches timed out (5 to 10 minutes), which at a thousand agents is the load
// tabby-typha exists to take off it.
func (f *Fanout) untilTyphaAnswers(w watch.Interface, streaming bool) watch.Interface {
	dw := &directWatch{Interface: w, fan: f, listed: make(chan struct{}), done: make(chan struct{})}
	if streaming {
		dw.out = make(chan watch.Event)
		go dw.relay()
	} else {
		close(dw.listed)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.direct == nil {
		f.direct = map[*directWatch]struct{}{}
	}
	f.direct[dw] = struct{}{}
	if !f.probing {
		f.probing = true
		go f.probeUntilBack()
	}
	return dw
}

// probeUntilBack asks tabby-typha every RetryAfter (and up to half that again, so that agents
// cut off together do not come back together) while watches are on the API server. When it
// answers, those watches end, each within a sixth of RetryAfter of its list.
func (f *Fanout) probeUntilBack() {
	for {
		time.Sleep(f.retryAfter + rand.N(f.retryAfter/2+1))
		f.mu.Lock()
		if len(f.direct) == 0 {
			f.probing = false
			f.mu.Unlock()
			return
		}
		f.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := f.probe(ctx)
		cancel()
		if err != nil {
			f.log.Debug("tabby-typha still unusable", "err", err)
			continue
		}
		f.mu.Lock()
		f.down = false
		back := make([]*directWatch, 0, len(f.direct))
		for w := range f.direct {
			back = append(back, w)
		}
		clear(f.direct)
		f.probing = false
		f.mu.Unlock()
		f.log.Info("tabby-typha answers again: moving the watches back to it", "watches", len(back))
		for _, w := range back {
			go w.cutWhenListed(f.retryAfter / 6)
		}
		return
	}
}
