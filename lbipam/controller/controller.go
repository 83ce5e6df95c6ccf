// Package controller runs LoadBalancer IPAM against the API server: it watches Services and
// LoadBalancer pools, asks the allocator (package lbipam) for each Service's addresses, writes
// them into the Service's status.loadBalancer.ingress and tells the Service's events why.
//
// The Services' statuses are the only record of what is taken, as in MetalLB's controller:
// Run rebuilds the allocator from every Service's status before it hands out anything, so a
// new leader or a restarted node loses nothing and hands out no address twice. Every write is a
// PUT of the status subresource with the resourceVersion just read (a compare-and-swap), so a
// write decided on a stale view fails and is decided again. One Run is one leadership term:
// only one node of the cluster runs it at a time (package lease).
package controller

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/tabbynet/tabby/apis/client"
	"github.com/tabbynet/tabby/apis/model"
	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/apis/validation"
	"github.com/tabbynet/tabby/lbipam"
)

// Config is what a term of the controller needs.
type Config struct {
	Client *client.Client
	// Identity names this instance in the events it writes (the node's name).
	Identity string
	Logger   *slog.Logger
	Metrics  *Metrics
}

// Component is the source of the controller's events (`kubectl describe service`).
const Component = "tabby-lbipam"

// Event reasons.
const (
	ReasonAssigned     = "LoadBalancerIPAssigned"
	ReasonReleased     = "LoadBalancerIPReleased"
	ReasonFailed       = "AllocationFailed"
	ReasonBadRequest   = "InvalidLoadBalancerRequest"
	ReasonConflict     = "LoadBalancerIPConflict"
	ReasonPoolDeleted  = "LoadBalancerPoolDeleted"
	poolsKey           = "\x00pools"
	resyncAfterFailure = 30 * time.Second
)

// Controller is one term of LoadBalancer IPAM.
type Controller struct {
	cfg   Config
	log   *slog.Logger
	alloc *lbipam.Allocator
	queue workqueue.TypedRateLimitingInterface[string]
	svcs  cache.SharedIndexInformer
	pools cache.SharedIndexInformer
	// refused are the Services waiting for an address: tried again when one frees up.
	refused map[string]bool
	// said is the last event told each Service, so that a retry does not repeat it.
	said map[string]string
}

// Run assigns addresses until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c := &Controller{
		cfg: cfg, log: cfg.Logger, alloc: lbipam.New(),
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		// The API server itself, never tabby-typha: one node runs the controller, and it reads
		// whole Services.
		svcs:    client.DirectInformer(cfg.Client.Services(""), dropManagedFields),
		pools:   client.DirectInformer(cfg.Client.IPPools(), nil),
		refused: map[string]bool{}, said: map[string]string{},
	}
	defer c.queue.ShutDown()
	enqueue := func(objs ...any) {
		if !slices.ContainsFunc(objs, concerns) {
			return
		}
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(objs[len(objs)-1]); err == nil {
			c.queue.Add(key)
		}
	}
	if _, err := c.svcs.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) { enqueue(o) }, UpdateFunc: func(old, o any) { enqueue(old, o) }, DeleteFunc: func(o any) { enqueue(o) },
	}); err != nil {
		return fmt.Errorf("watch Services: %w", err)
	}
	poolsChanged := func(any) { c.queue.Add(poolsKey) }
	if _, err := c.pools.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: poolsChanged, UpdateFunc: func(_, o any) { poolsChanged(o) }, DeleteFunc: poolsChanged}); err != nil {
		return fmt.Errorf("watch IPPools: %w", err)
	}
	go c.svcs.RunWithContext(ctx)
	go c.pools.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), c.svcs.HasSynced, c.pools.HasSynced) {
		return nil
	}
	if err := c.rebuild(ctx); err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	for c.next(ctx) {
	}
	return nil
}

// rebuild learns what is taken from every Service's status, oldest Service first (the older of
// two holding one address keeps it), then queues every Service.
func (c *Controller) rebuild(ctx context.Context) error {
	c.syncPools()
	// A list read from etcd, not the watch cache: a write of the last leader must be seen.
	list, err := c.cfg.Client.Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list Services: %w", err)
	}
	svcs := list.Items
	slices.SortFunc(svcs, func(a, b corev1.Service) int {
		return cmp.Or(a.CreationTimestamp.Time.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name))
	})
	n := 0
	for i := range svcs {
		s := &svcs[i]
		key := s.Namespace + "/" + s.Name
		if concerns(s) {
			c.queue.Add(key)
		}
		if !lbipam.ServiceOf(s) {
			continue
		}
		// A bad annotation does not free what the Service holds: its request still says how it
		// shares.
		r, _ := lbipam.FromService(s)
		held := ingressAddrs(s)
		n += len(held)
		for _, cf := range c.alloc.Claim(r, held) {
			c.queue.Add(cf.Loser)
		}
	}
	c.log.Info("LoadBalancer IPAM: rebuilt from the Services' status", "services", len(svcs), "addresses", n, "pools", len(c.alloc.Pools()))
	c.cfg.Metrics.usage(c.alloc, len(c.orphaned()))
	return nil
}

// next handles one queued key; false once the queue shuts down.
func (c *Controller) next(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	err := c.reconcile(ctx, key)
	c.cfg.Metrics.usage(c.alloc, len(c.orphaned()))
	if err == nil {
		c.queue.Forget(key)
		return true
	}
	if ctx.Err() != nil {
		return false
	}
	if apierrors.IsConflict(err) {
		c.log.Debug("LoadBalancer IPAM: Service changed while being written; again", "service", key)
	} else {
		c.log.Warn("LoadBalancer IPAM: cannot reconcile a Service; retrying", "service", key, "error", err)
	}
	c.queue.AddRateLimited(key)
	return true
}

// syncPools gives the allocator the valid LoadBalancer pools.
func (c *Controller) syncPools() {
	var pools []model.Pool
	for _, o := range c.pools.GetStore().List() {
		p, errs := validation.ParseIPPool(o.(*v1.IPPool))
		if len(errs) > 0 {
			c.log.Warn("LoadBalancer IPAM: IPPool ignored", "pool", o.(*v1.IPPool).Name, "error", errs.ToAggregate())
			continue
		}
		pools = append(pools, p)
	}
	c.alloc.SetPools(pools)
}

func (c *Controller) reconcile(ctx context.Context, key string) error {
	if key == poolsKey {
		c.syncPools()
		for _, o := range c.svcs.GetStore().List() {
			if concerns(o) {
				c.queue.Add(o.(*corev1.Service).Namespace + "/" + o.(*corev1.Service).Name)
			}
		}
		return nil
	}
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	// A read from etcd: the informer may not have seen this controller's own last write, and
	// deciding from an older status would hand out an address twice.
	svc, err := c.cfg.Client.Services(ns).Get(ctx, name)
	if apierrors.IsNotFound(err) {
		c.release(key)
		return nil
	}
	if err != nil {
		return fmt.Errorf("get Service %s: %w", key, err)
	}
	if !lbipam.ServiceOf(svc) {
		return c.disown(ctx, svc, key)
	}
	r, err := lbipam.FromService(svc)
	if err != nil {
		c.cfg.Metrics.failed()
		c.event(ctx, svc, corev1.EventTypeWarning, ReasonBadRequest, err.Error())
		return nil
	}
	status := ingressAddrs(svc)
	if !slices.Equal(status, c.alloc.Held(key)) {
		before := c.alloc.Held(key)
		for _, cf := range c.alloc.Claim(r, status) {
			if cf.Loser != key {
				c.queue.Add(cf.Loser)
				continue
			}
			c.log.Warn("LoadBalancer IPAM: two Services hold one address; the one created later gives it up", "address", cf.Addr, "loser", cf.Loser, "keeps", cf.Winner, "why", cf.Why)
			c.event(ctx, svc, corev1.EventTypeWarning, ReasonConflict, fmt.Sprintf("address %s is also %s's (created earlier) and %s: this Service gives it up", cf.Addr, cf.Winner, cf.Why))
		}
		if freed(before, c.alloc.Held(key)) {
			c.retryRefused()
		}
	}
	if orphans := c.alloc.Orphans(key); len(orphans) > 0 {
		msg := fmt.Sprintf("the LoadBalancer pool of %s was deleted: the Service keeps the address(es), and no other Service gets them; create a LoadBalancer pool holding them, or move the Service to another address", joinAddrs(orphans))
		if c.said[key] != msg {
			c.log.Warn("LoadBalancer IPAM: a Service holds addresses of a deleted pool", "service", key, "addresses", orphans)
		}
		c.event(ctx, svc, corev1.EventTypeWarning, ReasonPoolDeleted, msg)
	}
	d, refusal := c.alloc.Allocate(r)
	if refusal != nil {
		// No partial status: what the Service held and may not keep goes too.
		if err := c.write(ctx, svc, r, nil); err != nil {
			return err
		}
		c.refused[key] = true
		c.cfg.Metrics.failed()
		c.event(ctx, svc, corev1.EventTypeWarning, ReasonFailed, "no LoadBalancer address: "+refusal.Error())
		return nil
	}
	delete(c.refused, key)
	if slices.Equal(d.Addresses, status) {
		return nil
	}
	if err := c.write(ctx, svc, r, d.Addresses); err != nil {
		return err
	}
	msg := "assigned " + joinAddrs(d.Addresses)
	if len(d.Missing) > 0 {
		msg += " (ipFamilyPolicy PreferDualStack: " + strings.Join(d.Missing, "; ") + ")"
	}
	c.event(ctx, svc, corev1.EventTypeNormal, ReasonAssigned, msg)
	return nil
}

// write sets the Service's ingress to addrs (compare-and-swap on the resourceVersion read) and
// records them as the Service's.
func (c *Controller) write(ctx context.Context, svc *corev1.Service, r lbipam.Request, addrs []netip.Addr) error {
	key := svc.Namespace + "/" + svc.Name
	before := c.alloc.Held(key)
	if !slices.Equal(ingressAddrs(svc), addrs) || len(svc.Status.LoadBalancer.Ingress) != len(addrs) {
		out := svc.DeepCopy()
		out.Status.LoadBalancer.Ingress = nil
		for _, a := range addrs {
			out.Status.LoadBalancer.Ingress = append(out.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: a.String()})
		}
		if _, err := c.cfg.Client.Services(svc.Namespace).UpdateStatus(ctx, out); err != nil {
			return fmt.Errorf("write the status of Service %s: %w", key, err)
		}
		if len(addrs) > 0 {
			c.cfg.Metrics.wrote()
		}
		c.log.Info("LoadBalancer IPAM: Service status written", "service", key, "addresses", addrs)
	}
	c.alloc.Claim(r, addrs)
	// The gauges say so now, not after the event the caller writes next.
	c.cfg.Metrics.usage(c.alloc, len(c.orphaned()))
	if freed(before, addrs) {
		c.retryRefused()
	}
	return nil
}

// disown releases what a Service that is no longer tabby's holds (its type or class changed)
// and clears the ingress tabby wrote, not another controller's.
func (c *Controller) disown(ctx context.Context, svc *corev1.Service, key string) error {
	held := c.alloc.Held(key)
	if len(held) == 0 {
		return nil
	}
	if slices.Equal(ingressAddrs(svc), held) {
		out := svc.DeepCopy()
		out.Status.LoadBalancer.Ingress = nil
		if _, err := c.cfg.Client.Services(svc.Namespace).UpdateStatus(ctx, out); err != nil {
			return fmt.Errorf("clear the status of Service %s: %w", key, err)
		}
	}
	c.release(key)
	c.event(ctx, svc, corev1.EventTypeNormal, ReasonReleased, fmt.Sprintf("released %s: the Service is no longer a LoadBalancer of class %s or none", joinAddrs(held), v1.LoadBalancerClass))
	return nil
}

func (c *Controller) release(key string) {
	held := c.alloc.Held(key)
	c.alloc.Release(key)
	delete(c.refused, key)
	delete(c.said, key)
	if len(held) > 0 {
		c.log.Info("LoadBalancer IPAM: addresses released", "service", key, "addresses", held)
		c.retryRefused()
	}
}

// retryRefused queues the Services waiting for an address: one may have freed up.
func (c *Controller) retryRefused() {
	for k := range c.refused {
		c.queue.Add(k)
	}
}

// dropManagedFields keeps the informer's copies of every Service of the cluster small: the
// controller reads none of their field managers.
func dropManagedFields(obj any) (any, error) {
	if s, ok := obj.(*corev1.Service); ok {
		s.ManagedFields = nil
	}
	return obj, nil
}

// concerns tells whether a Service (or its deletion) may be LoadBalancer IPAM's business: it is
// tabby's, or it has an ingress that may be tabby's to clear or free. The others (every
// ClusterIP Service of the cluster) are not read again.
func concerns(obj any) bool {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	s, ok := obj.(*corev1.Service)
	return ok && (lbipam.ServiceOf(s) || len(s.Status.LoadBalancer.Ingress) > 0)
}

// orphaned are the held addresses in no pool.
func (c *Controller) orphaned() []netip.Addr { return c.alloc.Orphaned() }

// freed tells whether after lacks an address before had.
func freed(before, after []netip.Addr) bool {
	return slices.ContainsFunc(before, func(a netip.Addr) bool { return !slices.Contains(after, a) })
}

// ingressAddrs are the addresses of the Service's status.
func ingressAddrs(s *corev1.Service) []netip.Addr {
	var out []netip.Addr
	for _, in := range s.Status.LoadBalancer.Ingress {
		if a, err := netip.ParseAddr(in.IP); err == nil && !slices.Contains(out, a.Unmap()) {
			out = append(out, a.Unmap())
		}
	}
	return out
}

func joinAddrs(addrs []netip.Addr) string {
	s := make([]string, len(addrs))
	for i, a := range addrs {
		s[i] = a.String()
	}
	return strings.Join(s, ", ")
}
