// Package policystatus writes the status conditions of the cluster's AdminNetworkPolicies,
// BaselineAdminNetworkPolicy and ClusterNetworkPolicies: whether felix enforces each as written
// (Accepted) and whether it shares its priority with another (PriorityConflict). What each
// object gets is decided by policy.AdminConditions, from the compilation felix enforces.
//
// One node of the cluster writes them at a time (package lease), and only when a condition
// changes: each object is compared with what it should say before anything is written, and a
// write is a PUT of the status subresource with the resourceVersion read (a compare-and-swap), so
// a decision made on a stale view fails and is made again.
package policystatus

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	anpv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/tabbynet/tabby/apis/client"
	"github.com/tabbynet/tabby/felix/policy"
)

// Config is what a term of the controller needs.
type Config struct {
	Client  *client.Client
	Logger  *slog.Logger
	Metrics *Metrics
}

// Controller is one term of the status writer.
type Controller struct {
	cfg   Config
	log   *slog.Logger
	queue workqueue.TypedRateLimitingInterface[policy.AdminKey]
	// One informer per kind, by the kind's name (policy.KindANP, ...).
	informers map[string]cache.SharedIndexInformer
}

// Run writes conditions until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c := &Controller{
		cfg: cfg, log: cfg.Logger,
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[policy.AdminKey]()),
		// The API server itself, never tabby-typha: one node runs the controller, and it
		// writes what it reads.
		informers: map[string]cache.SharedIndexInformer{
			policy.KindANP:  client.DirectInformer(cfg.Client.AdminNetworkPolicies(), dropManagedFields),
			policy.KindBANP: client.DirectInformer(cfg.Client.BaselineAdminNetworkPolicies(), dropManagedFields),
			policy.KindCNP:  client.DirectInformer(cfg.Client.ClusterNetworkPolicies(), dropManagedFields),
		},
	}
	defer c.queue.ShutDown()
	var synced []cache.InformerSynced
	for kind, inf := range c.informers {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { c.changed(nil, parse(o)) },
			UpdateFunc: func(old, o any) { c.changed(parse(old), parse(o)) },
			DeleteFunc: func(o any) { c.changed(parse(o), nil) },
		}); err != nil {
			return fmt.Errorf("watch %s: %w", kind, err)
		}
		go inf.RunWithContext(ctx)
		synced = append(synced, inf.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil
	}
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	for c.next(ctx) {
	}
	return nil
}

// changed queues the policy that changed and, when it came, went or moved to another priority,
// every policy that shared its old or shares its new priority: their conflicts changed too.
func (c *Controller) changed(old, cur *policy.AdminPolicy) {
	if cur != nil {
		c.queue.Add(cur.Key())
	}
	if old != nil && cur != nil && old.Tier == cur.Tier && old.Priority == cur.Priority {
		return
	}
	for _, moved := range []*policy.AdminPolicy{old, cur} {
		if moved != nil {
			for _, p := range c.ranked(moved.Tier, moved.Priority) {
				c.queue.Add(p.Key())
			}
		}
	}
}

// next handles one queued policy; false once the queue shuts down.
func (c *Controller) next(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	err := c.reconcile(ctx, key)
	if err == nil {
		c.queue.Forget(key)
		return true
	}
	if ctx.Err() != nil {
		return false
	}
	if apierrors.IsConflict(err) {
		c.log.Debug("policy status: the policy changed while being written; again", "policy", key.String())
	} else {
		c.log.Warn("policy status: cannot write a policy's status; retrying", "policy", key.String(), "error", err)
	}
	c.queue.AddRateLimited(key)
	return true
}

// reconcile writes key's conditions if they are not what they should be.
func (c *Controller) reconcile(ctx context.Context, key policy.AdminKey) error {
	inf := c.informers[key.Kind]
	if inf == nil {
		return nil
	}
	obj, ok, err := inf.GetStore().GetByKey(key.Name)
	if err != nil || !ok {
		return nil
	}
	p := parse(obj)
	want := policy.AdminConditions(p, c.ranked(p.Tier, p.Priority))
	switch o := obj.(type) {
	case *anpv1alpha1.AdminNetworkPolicy:
		if merged, changed := merge(o.Status.Conditions, want); changed {
			out := o.DeepCopy() // the informer's object is shared
			out.Status.Conditions = merged
			_, err = c.cfg.Client.AdminNetworkPolicies().UpdateStatus(ctx, out)
			return c.wrote(key, merged, err)
		}
	case *anpv1alpha1.BaselineAdminNetworkPolicy:
		if merged, changed := merge(o.Status.Conditions, want); changed {
			out := o.DeepCopy()
			out.Status.Conditions = merged
			_, err = c.cfg.Client.BaselineAdminNetworkPolicies().UpdateStatus(ctx, out)
			return c.wrote(key, merged, err)
		}
	case *cnpv1beta1.ClusterNetworkPolicy:
		if merged, changed := merge(o.Status.Conditions, want); changed {
			out := o.DeepCopy()
			out.Status.Conditions = merged
			_, err = c.cfg.Client.ClusterNetworkPolicies().UpdateStatus(ctx, out)
			return c.wrote(key, merged, err)
		}
	}
	return nil
}

// merge sets want into a copy of conds: true when a condition changed. A condition whose status
// stays keeps its transition time; the conditions of other writers stay as they are.
func merge(conds, want []metav1.Condition) ([]metav1.Condition, bool) {
	merged := append([]metav1.Condition(nil), conds...)
	changed := false
	for _, w := range want {
		if meta.SetStatusCondition(&merged, w) {
			changed = true
		}
	}
	return merged, changed
}

// wrote accounts for a status write of key that ended with err.
func (c *Controller) wrote(key policy.AdminKey, conds []metav1.Condition, err error) error {
	if err != nil {
		return fmt.Errorf("write the status of %s: %w", key, err)
	}
	c.cfg.Metrics.wrote()
	acc := meta.FindStatusCondition(conds, policy.ConditionAccepted)
	c.log.Info("policy status written", "policy", key.String(), "accepted", acc.Status, "reason", acc.Reason)
	return nil
}

// ranked is every admin policy of tier at prio: the only ones whose conditions may depend on
// each other. Only they are parsed, so a cluster's policies are not each read once per policy.
func (c *Controller) ranked(tier policy.Tier, prio int32) []*policy.AdminPolicy {
	var out []*policy.AdminPolicy
	for _, inf := range c.informers {
		for _, o := range inf.GetStore().List() {
			if t, p, ok := rankOf(o); ok && t == tier && p == prio {
				out = append(out, parse(o))
			}
		}
	}
	return out
}

// rankOf is where an object is evaluated, read without parsing it: its tier and priority (0 for
// the baseline, as policy orders it).
func rankOf(obj any) (policy.Tier, int32, bool) {
	switch o := obj.(type) {
	case *anpv1alpha1.AdminNetworkPolicy:
		return policy.TierAdmin, o.Spec.Priority, true
	case *anpv1alpha1.BaselineAdminNetworkPolicy:
		return policy.TierBaseline, 0, true
	case *cnpv1beta1.ClusterNetworkPolicy:
		// The tier as FromCNP reads it, so that the two never disagree.
		q := policy.FromCNP(&cnpv1beta1.ClusterNetworkPolicy{Spec: cnpv1beta1.ClusterNetworkPolicySpec{Tier: o.Spec.Tier, Priority: o.Spec.Priority}})
		return q.Tier, q.Priority, true
	}
	return 0, 0, false
}

// parse is the admin policy of an informer's object (nil for anything else).
func parse(obj any) *policy.AdminPolicy {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	switch o := obj.(type) {
	case *anpv1alpha1.AdminNetworkPolicy:
		return policy.FromANP(o)
	case *anpv1alpha1.BaselineAdminNetworkPolicy:
		return policy.FromBANP(o)
	case *cnpv1beta1.ClusterNetworkPolicy:
		return policy.FromCNP(o)
	}
	return nil
}

// dropManagedFields keeps the informers' copies small: the controller reads no field manager.
func dropManagedFields(obj any) (any, error) {
	if o, ok := obj.(metav1.Object); ok {
		o.SetManagedFields(nil)
	}
	return obj, nil
}

// Metrics are the status writer's figures in tabby-node's registry.
type Metrics struct {
	writes prometheus.Counter
	leader prometheus.Gauge
}

// NewMetrics registers the status writer's metrics.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		writes: prometheus.NewCounter(prometheus.CounterOpts{Name: "tabby_policy_status_writes_total",
			Help: "Status writes of admin network policies (AdminNetworkPolicy, BaselineAdminNetworkPolicy, ClusterNetworkPolicy) by this node."}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tabby_policy_status_leader",
			Help: "1 while this node holds the policy status Lease and writes the admin network policies' conditions."}),
	}
	reg.MustRegister(m.writes, m.leader)
	return m
}

// SetLeader records whether this node leads.
func (m *Metrics) SetLeader(on bool) {
	if m == nil {
		return
	}
	if on {
		m.leader.Set(1)
		return
	}
	m.leader.Set(0)
}

func (m *Metrics) wrote() {
	if m != nil {
		m.writes.Inc()
	}
}
