package policystatus_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	anpv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/tabbynet/tabby/apis/client"
	"github.com/tabbynet/tabby/felix/policy"
	"github.com/tabbynet/tabby/internal/lease"
	"github.com/tabbynet/tabby/internal/testenv"
	"github.com/tabbynet/tabby/internal/testwait"
	"github.com/tabbynet/tabby/policystatus"
)

// One control plane serves every test of the package; each test removes the cluster-wide
// policies it made.
var (
	envOnce sync.Once
	env     *testenv.Env
	envErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if env != nil {
		env.Stop()
	}
	os.Exit(code)
}

// wait is how long a test waits for the writer: generous, the machine is shared.
const wait = 60 * time.Second

type scene struct {
	t  *testing.T
	c  *client.Client
	ns string
}

func newScene(t *testing.T) *scene {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a real API server (skipped with -short)")
	}
	envOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		env, envErr = testenv.StartProcess(ctx, testenv.Options{})
	})
	if envErr != nil {
		t.Fatalf("control plane: %v", envErr)
	}
	s := &scene{t: t, c: env.Client, ns: strings.ToLower(t.Name())}
	ctx := context.Background()
	if _, err := s.c.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		anps, err := s.c.AdminNetworkPolicies().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		for _, o := range anps.Items {
			if err := s.c.AdminNetworkPolicies().Delete(ctx, o.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("cleanup: %v", err)
			}
		}
		cnps, err := s.c.ClusterNetworkPolicies().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		for _, o := range cnps.Items {
			if err := s.c.ClusterNetworkPolicies().Delete(ctx, o.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("cleanup: %v", err)
			}
		}
		if err := s.c.BaselineAdminNetworkPolicies().Delete(ctx, "default", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("cleanup: %v", err)
		}
	})
	return s
}

// node is one tabby-node's status writer: a candidate for the Lease running the controller
// while it leads, with its own metrics.
type node struct {
	reg  *prometheus.Registry
	stop func()
}

func (s *scene) node(id string) *node {
	n := &node{reg: prometheus.NewRegistry()}
	m := policystatus.NewMetrics(n.reg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	log := slog.New(slog.NewTextHandler(testWriter{s.t}, nil)).With("node", id)
	go func() {
		defer close(done)
		_ = lease.Run(ctx, lease.Config{Client: s.c, Namespace: s.ns, Name: "tabby-policy-status", Identity: id, Duration: 6 * time.Second, RenewEvery: 2 * time.Second,
			Logger: log, OnLeading: m.SetLeader}, func(ctx context.Context) {
			if err := policystatus.Run(ctx, policystatus.Config{Client: s.c, Logger: log, Metrics: m}); err != nil {
				s.t.Errorf("%s: %v", id, err)
			}
		})
	}()
	var once sync.Once
	n.stop = func() { once.Do(func() { cancel(); <-done }) }
	s.t.Cleanup(n.stop)
	return n
}

func (n *node) metric(name string) float64 {
	mfs, err := n.reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if m.Counter != nil {
				return m.Counter.GetValue()
			}
			return m.Gauge.GetValue()
		}
	}
	return 0
}

func anp(name string, prio int32, domainNames ...anpv1alpha1.DomainName) *anpv1alpha1.AdminNetworkPolicy {
	o := &anpv1alpha1.AdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: anpv1alpha1.AdminNetworkPolicySpec{
		Priority: prio, Subject: anpv1alpha1.AdminNetworkPolicySubject{Namespaces: &metav1.LabelSelector{MatchLabels: map[string]string{"team": name}}},
		Egress: []anpv1alpha1.AdminNetworkPolicyEgressRule{{Name: "to-net", Action: "Deny", To: []anpv1alpha1.AdminNetworkPolicyEgressPeer{{Networks: []anpv1alpha1.CIDR{"203.0.113.0/24"}}}}}}}
	if len(domainNames) > 0 {
		o.Spec.Egress = append(o.Spec.Egress, anpv1alpha1.AdminNetworkPolicyEgressRule{Name: "to-names", Action: "Allow",
			To: []anpv1alpha1.AdminNetworkPolicyEgressPeer{{DomainNames: domainNames}}})
	}
	return o
}

func (s *scene) createANP(o *anpv1alpha1.AdminNetworkPolicy) {
	s.t.Helper()
	if _, err := s.c.AdminNetworkPolicies().Create(context.Background(), o); err != nil {
		s.t.Fatalf("create %s: %v", o.Name, err)
	}
}

func (s *scene) getANP(name string) *anpv1alpha1.AdminNetworkPolicy {
	s.t.Helper()
	o, err := s.c.AdminNetworkPolicies().Get(context.Background(), name)
	if err != nil {
		s.t.Fatalf("get %s: %v", name, err)
	}
	return o
}

// says tells whether conds hold a condition of type typ with status st for generation gen whose
// message holds every string of words.
func says(conds []metav1.Condition, gen int64, typ string, st metav1.ConditionStatus, reason string, words ...string) bool {
	c := meta.FindStatusCondition(conds, typ)
	if c == nil || c.Status != st || c.ObservedGeneration != gen || c.Reason != reason || c.LastTransitionTime.IsZero() {
		return false
	}
	for _, w := range words {
		if !strings.Contains(c.Message, w) {
			return false
		}
	}
	return true
}

// waitANP waits until the ANP's current generation has the conditions.
func (s *scene) waitANP(name, what string, ok func(conds []metav1.Condition, gen int64) bool) *anpv1alpha1.AdminNetworkPolicy {
	s.t.Helper()
	var last *anpv1alpha1.AdminNetworkPolicy
	testwait.Until(s.t, name+": "+what, wait, func() bool {
		last = s.getANP(name)
		return ok(last.Status.Conditions, last.Generation)
	})
	return last
}

func TestConditionsFollowTheSpec(t *testing.T) {
	s := newScene(t)
	s.node("node-a")
	ctx := context.Background()

	s.createANP(anp("a", 10))
	s.waitANP("a", "accepted, unique priority", func(c []metav1.Condition, g int64) bool {
		return says(c, g, policy.ConditionAccepted, "True", policy.ReasonAccepted) &&
			says(c, g, policy.ConditionPriorityConflict, "False", policy.ReasonUniquePriority)
	})

	// b shares a's priority and has a peer tabby does not enforce.
	s.createANP(anp("b", 10, "*.example.com"))
	s.waitANP("b", "not accepted (domainNames), conflicting with a", func(c []metav1.Condition, g int64) bool {
		return says(c, g, policy.ConditionAccepted, "False", policy.ReasonUnsupported, `spec.egress[1].to[0].domainNames ["*.example.com"]: not supported`) &&
			says(c, g, policy.ConditionPriorityConflict, "True", policy.ReasonSamePriority, "AdminNetworkPolicy/a also has priority 10")
	})
	s.waitANP("a", "conflicting with b", func(c []metav1.Condition, g int64) bool {
		return says(c, g, policy.ConditionAccepted, "True", policy.ReasonAccepted) &&
			says(c, g, policy.ConditionPriorityConflict, "True", policy.ReasonSamePriority, "AdminNetworkPolicy/b also has priority 10")
	})
	accSince := meta.FindStatusCondition(s.getANP("a").Status.Conditions, policy.ConditionAccepted).LastTransitionTime

	// An edit of b: the domainNames rule goes and the priority moves. Both follow, and a's
	// Accepted keeps the time it became True.
	b := s.getANP("b")
	edited := anp("b", 11)
	b.Spec = edited.Spec
	if _, err := s.c.AdminNetworkPolicies().Update(ctx, b); err != nil {
		t.Fatal(err)
	}
	got := s.waitANP("b", "accepted after the edit, unique priority", func(c []metav1.Condition, g int64) bool {
		return g > 1 && says(c, g, policy.ConditionAccepted, "True", policy.ReasonAccepted) &&
			says(c, g, policy.ConditionPriorityConflict, "False", policy.ReasonUniquePriority)
	})
	if got.Generation < 2 {
		t.Fatalf("b's generation %d after an edit", got.Generation)
	}
	a := s.waitANP("a", "no conflict once b moved", func(c []metav1.Condition, g int64) bool {
		return says(c, g, policy.ConditionPriorityConflict, "False", policy.ReasonUniquePriority)
	})
	if since := meta.FindStatusCondition(a.Status.Conditions, policy.ConditionAccepted).LastTransitionTime; !since.Equal(&accSince) {
		t.Errorf("a's Accepted moved from %v to %v though it stayed True", accSince, since)
	}

	// A ClusterNetworkPolicy of the admin tier at b's priority conflicts with it; the baseline
	// is accepted.
	if _, err := s.c.ClusterNetworkPolicies().Create(ctx, &cnpv1beta1.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: cnpv1beta1.ClusterNetworkPolicySpec{
		Tier: cnpv1beta1.AdminTier, Priority: 11, Subject: cnpv1beta1.ClusterNetworkPolicySubject{Namespaces: &metav1.LabelSelector{}}}}); err != nil {
		t.Fatal(err)
	}
	s.waitANP("b", "conflicting with the CNP x", func(c []metav1.Condition, g int64) bool {
		return says(c, g, policy.ConditionPriorityConflict, "True", policy.ReasonSamePriority, "ClusterNetworkPolicy/x also has priority 11")
	})
	testwait.Until(t, "the CNP x's conditions", wait, func() bool {
		o, err := s.c.ClusterNetworkPolicies().Get(ctx, "x")
		return err == nil && says(o.Status.Conditions, o.Generation, policy.ConditionAccepted, "True", policy.ReasonAccepted) &&
			says(o.Status.Conditions, o.Generation, policy.ConditionPriorityConflict, "True", policy.ReasonSamePriority, "AdminNetworkPolicy/b")
	})
	if _, err := s.c.BaselineAdminNetworkPolicies().Create(ctx, &anpv1alpha1.BaselineAdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: anpv1alpha1.BaselineAdminNetworkPolicySpec{Subject: anpv1alpha1.AdminNetworkPolicySubject{Namespaces: &metav1.LabelSelector{}}}}); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "the BANP's conditions", wait, func() bool {
		o, err := s.c.BaselineAdminNetworkPolicies().Get(ctx, "default")
		return err == nil && says(o.Status.Conditions, o.Generation, policy.ConditionAccepted, "True", policy.ReasonAccepted)
	})

	// No write without a change: a metadata edit of a (no new generation) is seen and written
	// nothing for. The controller handles events in order, so once a policy created after it
	// has its conditions, a's edit has been handled.
	patched, err := s.c.AdminNetworkPolicies().Patch(ctx, "a", types.MergePatchType, []byte(`{"metadata":{"annotations":{"example.com/note":"x"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	s.createANP(anp("sentinel", 500))
	s.waitANP("sentinel", "accepted", func(c []metav1.Condition, g int64) bool {
		return says(c, g, policy.ConditionAccepted, "True", policy.ReasonAccepted)
	})
	if rv := s.getANP("a").ResourceVersion; rv != patched.ResourceVersion {
		t.Errorf("a was written after a metadata edit: resourceVersion %s, was %s", rv, patched.ResourceVersion)
	}
}

func TestTwoNodesOneWriter(t *testing.T) {
	s := newScene(t)
	nodes := []*node{s.node("node-a"), s.node("node-b")}
	for i := range 3 {
		s.createANP(anp(fmt.Sprintf("p%d", i), int32(100+i)))
	}
	for i := range 3 {
		s.waitANP(fmt.Sprintf("p%d", i), "accepted", func(c []metav1.Condition, g int64) bool {
			return says(c, g, policy.ConditionAccepted, "True", policy.ReasonAccepted)
		})
	}
	leader, other := nodes[0], nodes[1]
	if leader.metric("tabby_policy_status_leader") != 1 {
		leader, other = other, leader
	}
	if leader.metric("tabby_policy_status_leader") != 1 || other.metric("tabby_policy_status_leader") != 0 {
		t.Fatalf("want one leader: %v %v", leader.metric("tabby_policy_status_leader"), other.metric("tabby_policy_status_leader"))
	}
	testwait.Until(t, "the leader to count 3 writes", wait, func() bool { return leader.metric("tabby_policy_status_writes_total") == 3 })
	if w := other.metric("tabby_policy_status_writes_total"); w != 0 {
		t.Errorf("the node without the Lease wrote %v statuses", w)
	}
	before := map[string]string{}
	for i := range 3 {
		name := fmt.Sprintf("p%d", i)
		before[name] = s.getANP(name).ResourceVersion
	}
	// The leader stops: the other takes over, finds every status as it should be and writes
	// only the new policy's.
	leader.stop()
	testwait.Until(t, "the other node to lead", wait, func() bool { return other.metric("tabby_policy_status_leader") == 1 })
	// The second new policy comes after the new leader's first look at every policy, and the
	// leader handles them in order: once it is written, the old ones have been looked at.
	for _, name := range []string{"after", "after2"} {
		s.createANP(anp(name, 200+int32(len(name))))
		s.waitANP(name, "accepted", func(c []metav1.Condition, g int64) bool {
			return says(c, g, policy.ConditionAccepted, "True", policy.ReasonAccepted)
		})
	}
	for name, rv := range before {
		if got := s.getANP(name).ResourceVersion; got != rv {
			t.Errorf("%s rewritten by the new leader: resourceVersion %s, was %s", name, got, rv)
		}
	}
	testwait.Until(t, "the new leader to count 2 writes (the old statuses stand)", wait, func() bool {
		return other.metric("tabby_policy_status_writes_total") == 2
	})
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", strings.TrimSpace(string(p)))
	return len(p), nil
}
