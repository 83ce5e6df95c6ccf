package syncer

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	anpv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/tabbynet/tabby/apis/client"
	"github.com/tabbynet/tabby/apis/trim"
	"github.com/tabbynet/tabby/felix"
	"github.com/tabbynet/tabby/felix/policy"
)

// PolicyWatcher feeds felix what NetworkPolicy needs: every Pod's labels and named ports, every
// Namespace's labels, every NetworkPolicy, AdminNetworkPolicy, ClusterNetworkPolicy and the
// BaselineAdminNetworkPolicy (parsed here, once, into felix/policy's types), one message per
// informer event (felix's manager
// then rewrites only what the change touches). Its caches keep nothing else of those objects: a
// Pod is trimmed to its labels and ports.
type PolicyWatcher struct {
	pods, namespaces, policies cache.SharedIndexInformer
	anps, banps, cnps          cache.SharedIndexInformer
	send                       func(msg any)
	log                        *slog.Logger
	synced                     chan struct{}
}

// NewPolicyWatcher watches through c and sends felix messages to send; m (may be nil) counts
// the watch events.
func NewPolicyWatcher(c *client.Client, send func(msg any), log *slog.Logger, m *Metrics) *PolicyWatcher {
	if log == nil {
		log = slog.Default()
	}
	t := trimmer(newLabelSets())
	w := &PolicyWatcher{
		send: send, log: log, synced: make(chan struct{}),
		pods:       client.Informer(c.Pods(metav1.NamespaceAll), t),
		namespaces: client.Informer(c.Namespaces(), t),
		policies:   client.Informer(c.NetworkPolicies(metav1.NamespaceAll), t),
		anps:       client.Informer(c.AdminNetworkPolicies(), t),
		banps:      client.Informer(c.BaselineAdminNetworkPolicies(), t),
		cnps:       client.Informer(c.ClusterNetworkPolicies(), t),
	}
	_, _ = w.pods.AddEventHandler(handler(m, "pods", func(obj any) { w.send(felix.PodUpdate{Pod: &obj.(*policyPodObject).pod}) },
		func(key policy.Key) { w.send(felix.PodRemove{Key: key}) }))
	_, _ = w.namespaces.AddEventHandler(handler(m, "namespaces", func(obj any) {
		ns := obj.(*corev1.Namespace)
		w.send(felix.NamespaceUpdate{Namespace: policy.Namespace{Name: ns.Name, Labels: ns.Labels}})
	}, func(key policy.Key) { w.send(felix.NamespaceRemove{Name: key.Name}) }))
	_, _ = w.policies.AddEventHandler(handler(m, "networkpolicies", func(obj any) {
		w.send(felix.NetworkPolicyUpdate{Policy: obj.(*networkingv1.NetworkPolicy)})
	}, func(key policy.Key) { w.send(felix.NetworkPolicyRemove{Key: key}) }))
	_, _ = w.anps.AddEventHandler(handler(m, "adminnetworkpolicies", func(obj any) {
		w.sendAdmin(policy.FromANP(obj.(*anpv1alpha1.AdminNetworkPolicy)))
	}, func(key policy.Key) {
		w.send(felix.AdminPolicyRemove{Key: policy.AdminKey{Kind: policy.KindANP, Name: key.Name}})
	}))
	_, _ = w.banps.AddEventHandler(handler(m, "baselineadminnetworkpolicies", func(obj any) {
		w.sendAdmin(policy.FromBANP(obj.(*anpv1alpha1.BaselineAdminNetworkPolicy)))
	}, func(key policy.Key) {
		w.send(felix.AdminPolicyRemove{Key: policy.AdminKey{Kind: policy.KindBANP, Name: key.Name}})
	}))
	_, _ = w.cnps.AddEventHandler(handler(m, "clusternetworkpolicies", func(obj any) {
		w.sendAdmin(policy.FromCNP(obj.(*cnpv1beta1.ClusterNetworkPolicy)))
	}, func(key policy.Key) {
		w.send(felix.AdminPolicyRemove{Key: policy.AdminKey{Kind: policy.KindCNP, Name: key.Name}})
	}))
	return w
}

// sendAdmin sends an admin policy to felix, saying first what of it tabby does not enforce.
func (w *PolicyWatcher) sendAdmin(p *policy.AdminPolicy) {
	for _, u := range p.Unsupported {
		w.log.Warn("admin network policy: a field tabby does not enforce", "policy", p.Key().String(), "field", u)
	}
	w.send(felix.AdminPolicyUpdate{Policy: p})
}

// handler turns informer events into update and remove calls; a delete whose final state was
// missed arrives as a tombstone, which still names the object.
func handler(m *Metrics, resource string, update func(obj any), remove func(policy.Key)) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { m.event(resource); update(obj) },
		UpdateFunc: func(_, obj any) { m.event(resource); update(obj) },
		DeleteFunc: func(obj any) {
			m.event(resource)
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if m, err := meta.Accessor(obj); err == nil {
				remove(policy.Key{Namespace: m.GetNamespace(), Name: m.GetName()})
			}
		},
	}
}

// Run starts the informers and, once all three have synced, tells felix it has the whole state.
func (w *PolicyWatcher) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, inf := range []cache.SharedIndexInformer{w.pods, w.namespaces, w.policies, w.anps, w.banps, w.cnps} {
		wg.Go(func() { inf.RunWithContext(ctx) })
	}
	if !cache.WaitForCacheSync(ctx.Done(), w.pods.HasSynced, w.namespaces.HasSynced, w.policies.HasSynced, w.anps.HasSynced, w.banps.HasSynced, w.cnps.HasSynced) {
		return fmt.Errorf("pod, namespace, NetworkPolicy and admin network policy caches did not sync: %w", ctx.Err())
	}
	w.log.Info("NetworkPolicy inputs synced", "pods", len(w.pods.GetStore().ListKeys()),
		"namespaces", len(w.namespaces.GetStore().ListKeys()), "networkPolicies", len(w.policies.GetStore().ListKeys()),
		"adminNetworkPolicies", len(w.anps.GetStore().ListKeys()), "baselineAdminNetworkPolicies", len(w.banps.GetStore().ListKeys()),
		"clusterNetworkPolicies", len(w.cnps.GetStore().ListKeys()))
	w.send(felix.PolicyInSync{})
	close(w.synced)
	<-ctx.Done()
	return nil
}

// Synced is closed once felix has been sent PolicyInSync.
func (w *PolicyWatcher) Synced() <-chan struct{} { return w.synced }

// PolicyPod is what NetworkPolicy reads of a Pod: labels, named container ports, host network.
func PolicyPod(p *corev1.Pod) policy.Pod {
	out := policy.Pod{Key: policy.Key{Namespace: p.Namespace, Name: p.Name}, Labels: p.Labels, HostNetwork: p.Spec.HostNetwork}
	for _, c := range p.Spec.Containers {
		for _, port := range c.Ports {
			if port.Name == "" || port.ContainerPort <= 0 || port.ContainerPort > 65535 {
				continue
			}
			proto := policy.Protocol(port.Protocol)
			if proto == "" {
				proto = "TCP"
			}
			out.NamedPorts = append(out.NamedPorts, policy.NamedPort{Name: port.Name, Protocol: proto, Port: uint16(port.ContainerPort)})
		}
	}
	return out
}

// policyPodObject is what the pod informer keeps of a Pod: the part NetworkPolicy reads, which
// names it, and its resourceVersion. Every tabby-node caches every Pod of the cluster: a Pod
// trimmed but kept as a corev1.Pod is still mostly empty structs, and so is an embedded
// ObjectMeta; this keeps the few fields read, its labels shared with like pods.
type policyPodObject struct {
	pod             policy.Pod
	resourceVersion string
}

func (p *policyPodObject) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject shares the labels and ports: nothing modifies a cached object.
func (p *policyPodObject) DeepCopyObject() runtime.Object { c := *p; return &c }

// GetObjectMeta is what the informer reads to key and version the object; it is built when
// asked (at an event), not kept.
func (p *policyPodObject) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Name: p.pod.Name, Namespace: p.pod.Namespace, Labels: p.pod.Labels, ResourceVersion: p.resourceVersion}
}

// trimmer keeps only what the pod, namespace and policy messages read, with equal label sets
// shared.
func trimmer(sets *labelSets) cache.TransformFunc {
	return func(obj any) (any, error) {
		switch o := obj.(type) {
		case *corev1.Pod:
			p := PolicyPod(o)
			p.Labels = sets.intern(p.Labels)
			return &policyPodObject{pod: p, resourceVersion: o.ResourceVersion}, nil
		case *corev1.Namespace:
			return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.Name, Labels: sets.intern(o.Labels), UID: o.UID, ResourceVersion: o.ResourceVersion}}, nil
		case *networkingv1.NetworkPolicy, *anpv1alpha1.AdminNetworkPolicy, *anpv1alpha1.BaselineAdminNetworkPolicy, *cnpv1beta1.ClusterNetworkPolicy:
			return trim.Object(o)
		}
		return obj, nil
	}
}
