package netpol

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// minRound is the least time from one round's start to the next's.
const minRound = 300 * time.Millisecond

// Runner applies cases to the world's cluster through the API server and waits, after each
// step, until every probe agrees with the oracle or the deadline passes.
type Runner struct {
	W        *World
	Oracle   *Oracle
	Prober   *Prober
	Deadline time.Duration // per step, from the API writes to agreement
	Logf     func(format string, args ...any)

	Stats Stats

	probes    []Probe
	applied   map[string]*networkingv1.NetworkPolicy // by namespace/name, as the server returned it
	podLabels map[string]map[string]string
	nsLabels  map[string]map[string]string
	observed  map[Probe]Outcome // the last matrix probed
}

// Stats count what a run did.
type Stats struct {
	Cases, Steps, Fences, Rounds, Probes int
}

// StepResult is how one step went.
type StepResult struct {
	Case       string
	Step       int
	Note       string
	Expected   map[Probe]Verdict
	Got        map[Probe]Outcome
	Mismatches []Mismatch // empty when the dataplane agreed
	Rounds     int
	Took       time.Duration
	// Unchanged: the expected matrix is the one probed before the step, so agreement does not
	// show that the node applied the step (only that it broke nothing). Cases start behind a
	// fence to avoid that; later steps of a case are only flagged.
	Unchanged bool
}

// OK tells whether the dataplane agreed with the oracle.
func (s *StepResult) OK() bool { return len(s.Mismatches) == 0 }

// NewRunner starts from the world as NewWorld made it: no policies, base labels.
func NewRunner(w *World, o *Oracle, pr *Prober, deadline time.Duration, logf func(string, ...any)) *Runner {
	r := &Runner{W: w, Oracle: o, Prober: pr, Deadline: deadline, Logf: logf,
		probes: w.Probes(), applied: map[string]*networkingv1.NetworkPolicy{},
		podLabels: map[string]map[string]string{}, nsLabels: map[string]map[string]string{}}
	for _, p := range w.Pods {
		r.podLabels[p.Key()] = BasePodLabels(p.Name)
	}
	for _, ns := range Namespaces {
		r.nsLabels[ns] = BaseNamespaceLabels(ns)
	}
	return r
}

// Probes are the probes of every round.
func (r *Runner) Probes() []Probe { return r.probes }

// state is what the cluster should hold after a step.
type state struct {
	policies  map[string]*networkingv1.NetworkPolicy
	podLabels map[string]map[string]string
	nsLabels  map[string]map[string]string
}

// stateOf is the state after step i of c: its policies, the base labels changed by the label
// sets of steps 0…i.
func stateOf(w *World, c Case, i int) (state, error) {
	s := state{policies: map[string]*networkingv1.NetworkPolicy{}, podLabels: map[string]map[string]string{}, nsLabels: map[string]map[string]string{}}
	for _, p := range w.Pods {
		s.podLabels[p.Key()] = BasePodLabels(p.Name)
	}
	for _, ns := range Namespaces {
		s.nsLabels[ns] = BaseNamespaceLabels(ns)
	}
	for k := 0; k <= i; k++ {
		for key, l := range c.Steps[k].PodLabels {
			if w.Pod(key) == nil {
				return s, fmt.Errorf("case %s step %d: labels for unknown pod %s", c.Name, k, key)
			}
			s.podLabels[key] = maps.Clone(l)
		}
		for ns, l := range c.Steps[k].NamespaceLabels {
			if _, ok := s.nsLabels[ns]; !ok {
				return s, fmt.Errorf("case %s step %d: labels for unknown namespace %s", c.Name, k, ns)
			}
			s.nsLabels[ns] = maps.Clone(l)
		}
	}
	for _, p := range c.Steps[i].Policies {
		key := p.Namespace + "/" + p.Name
		if _, dup := s.policies[key]; dup {
			return s, fmt.Errorf("case %s step %d: policy %s twice", c.Name, i, key)
		}
		s.policies[key] = p
	}
	return s, nil
}

// Expect is the oracle's verdict on every probe after step i of c, without touching the
// cluster.
func (r *Runner) Expect(ctx context.Context, c Case, i int) (map[Probe]Verdict, error) {
	s, err := stateOf(r.W, c, i)
	if err != nil {
		return nil, err
	}
	return r.expect(ctx, s)
}

// RunCase runs the steps of c in order and stops at the first that does not agree (later
// steps build on it). An error is the harness's: the API, the oracle, the case itself.
func (r *Runner) RunCase(ctx context.Context, c Case) ([]StepResult, error) {
	r.Stats.Cases++
	var out []StepResult
	for i, st := range c.Steps {
		s, err := stateOf(r.W, c, i)
		if err != nil {
			return out, err
		}
		want, err := r.expect(ctx, s)
		if err != nil {
			return out, fmt.Errorf("case %s step %d: %w", c.Name, i, err)
		}
		unchanged := r.observed != nil && agrees(r.probes, want, r.observed)
		if i == 0 && unchanged && r.differs(s) {
			// The dataplane already shows what this case expects: go through a state that
			// shows something else first, or agreement would prove nothing.
			f, err := r.fence(ctx, c.Name)
			if err != nil || !f.OK() {
				return append(out, f), err
			}
			unchanged = false
		}
		res, err := r.step(ctx, s, want)
		if err != nil {
			return out, fmt.Errorf("case %s step %d: %w", c.Name, i, err)
		}
		res.Case, res.Step, res.Note, res.Unchanged = c.Name, i, st.Note, unchanged
		out = append(out, res)
		if !res.OK() {
			break
		}
	}
	return out, nil
}

// fence moves the cluster to a state whose matrix differs from the last one probed: no
// policies at all, or, if that is what was probed, a deny of all ingress everywhere.
func (r *Runner) fence(ctx context.Context, before string) (StepResult, error) {
	r.Stats.Fences++
	s := state{policies: map[string]*networkingv1.NetworkPolicy{}, podLabels: map[string]map[string]string{}, nsLabels: map[string]map[string]string{}}
	for _, p := range r.W.Pods {
		s.podLabels[p.Key()] = BasePodLabels(p.Name)
	}
	for _, ns := range Namespaces {
		s.nsLabels[ns] = BaseNamespaceLabels(ns)
	}
	want, err := r.expect(ctx, s)
	if err != nil {
		return StepResult{}, err
	}
	if agrees(r.probes, want, r.observed) {
		for _, ns := range Namespaces {
			p := Policy(ns, "fence-deny-ingress", Labels()).Ingress().P()
			s.policies[ns+"/"+p.Name] = p
		}
		if want, err = r.expect(ctx, s); err != nil {
			return StepResult{}, err
		}
	}
	res, err := r.step(ctx, s, want)
	res.Case, res.Step, res.Note = "fence before "+before, -1, fmt.Sprintf("%d policies", len(s.policies))
	return res, err
}

// expect asks the oracle about every probe in state s. The namespaces carry
// kubernetes.io/metadata.name, which the API server sets whatever the labels written.
func (r *Runner) expect(ctx context.Context, s state) (map[Probe]Verdict, error) {
	in := OracleInput{Namespaces: map[string]map[string]string{}}
	for _, key := range sortedKeys(s.policies) {
		p := s.policies[key]
		in.Policies = append(in.Policies, networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}, Spec: p.Spec})
	}
	for ns, l := range s.nsLabels {
		in.Namespaces[ns] = with(l, MetadataName, ns)
	}
	for _, p := range r.W.Pods {
		op := OraclePod{Namespace: p.Namespace, Name: p.Name, Labels: s.podLabels[p.Key()], IP: p.IP.String()}
		for _, cp := range p.Ports {
			op.Ports = append(op.Ports, OraclePort{Name: cp.Name, Port: int(cp.ContainerPort), Protocol: cp.Protocol})
		}
		in.Pods = append(in.Pods, op)
	}
	for _, pr := range r.probes {
		in.Probes = append(in.Probes, OracleProbe{From: pr.From, To: pr.To, Port: int(pr.Port), Protocol: pr.Protocol})
	}
	vs, err := r.Oracle.Judge(ctx, in)
	if err != nil {
		return nil, err
	}
	want := make(map[Probe]Verdict, len(vs))
	for i, v := range vs {
		want[r.probes[i]] = v
	}
	return want, nil
}

// step writes s to the API server and probes until the matrix agrees with want twice in a row
// (a denied probe must fail every time, not once) or the deadline passes.
func (r *Runner) step(ctx context.Context, s state, want map[Probe]Verdict) (StepResult, error) {
	r.Stats.Steps++
	start := time.Now()
	if err := r.apply(ctx, s); err != nil {
		return StepResult{}, err
	}
	res := StepResult{Expected: want}
	deadline := start.Add(r.Deadline)
	agreed := false
	var next time.Time
	for {
		// Rounds are paced: every TCP probe leaves a conntrack entry in TIME_WAIT for 120 s in
		// the kernel's one table (shared by every namespace, the machine's own included), and
		// back-to-back rounds of allowed probes would leave a thousand a second.
		select {
		case <-ctx.Done():
			return res, nil
		case <-time.After(time.Until(next)):
		}
		next = time.Now().Add(minRound)
		got := r.Prober.Run(ctx, r.probes)
		r.observed = got
		res.Rounds++
		r.Stats.Rounds++
		r.Stats.Probes += len(r.probes)
		res.Got, res.Mismatches = got, Diff(r.probes, want, got)
		if len(res.Mismatches) == 0 {
			if agreed {
				return res, nil
			}
			agreed = true
			res.Took = time.Since(start)
			continue
		}
		agreed = false
		res.Took = time.Since(start)
		if time.Now().After(deadline) || ctx.Err() != nil {
			return res, nil
		}
	}
}

// differs tells whether s is not what the cluster holds.
func (r *Runner) differs(s state) bool {
	if len(s.policies) != len(r.applied) {
		return true
	}
	for k, p := range s.policies {
		a, ok := r.applied[k]
		if !ok || !apiequality.Semantic.DeepEqual(defaultedSpec(p), a.Spec) {
			return true
		}
	}
	for k, l := range s.podLabels {
		if !maps.Equal(l, r.podLabels[k]) {
			return true
		}
	}
	for k, l := range s.nsLabels {
		if !maps.Equal(l, r.nsLabels[k]) {
			return true
		}
	}
	return false
}

// defaultedSpec is a spec as the API server stores it: policyTypes and port protocols filled
// in, so that a policy written again unchanged is not an update.
func defaultedSpec(p *networkingv1.NetworkPolicy) networkingv1.NetworkPolicySpec {
	s := *p.Spec.DeepCopy()
	if len(s.PolicyTypes) == 0 {
		s.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
		if len(s.Egress) > 0 {
			s.PolicyTypes = append(s.PolicyTypes, networkingv1.PolicyTypeEgress)
		}
	}
	fill := func(ps []networkingv1.NetworkPolicyPort) {
		for i := range ps {
			if ps[i].Protocol == nil {
				ps[i].Protocol = &protoTCP
			}
		}
	}
	for i := range s.Ingress {
		fill(s.Ingress[i].Ports)
	}
	for i := range s.Egress {
		fill(s.Egress[i].Ports)
	}
	return s
}

// apply writes s: namespace labels, pod labels, then policies created or updated, then the
// policies s no longer has deleted.
func (r *Runner) apply(ctx context.Context, s state) error {
	l := r.W.Lab
	for _, ns := range sortedKeys(s.nsLabels) {
		if !maps.Equal(s.nsLabels[ns], r.nsLabels[ns]) {
			if err := l.SetNamespaceLabels(ctx, ns, s.nsLabels[ns]); err != nil {
				return err
			}
			r.nsLabels[ns] = maps.Clone(s.nsLabels[ns])
		}
	}
	for _, key := range sortedKeys(s.podLabels) {
		if !maps.Equal(s.podLabels[key], r.podLabels[key]) {
			if err := l.SetPodLabels(ctx, key, s.podLabels[key]); err != nil {
				return err
			}
			r.podLabels[key] = maps.Clone(s.podLabels[key])
		}
	}
	for _, key := range sortedKeys(s.policies) {
		p := s.policies[key]
		cur, ok := r.applied[key]
		if ok && apiequality.Semantic.DeepEqual(defaultedSpec(p), cur.Spec) {
			continue
		}
		api := l.Kube.NetworkingV1().NetworkPolicies(p.Namespace)
		var got *networkingv1.NetworkPolicy
		var err error
		if !ok {
			got, err = api.Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}, Spec: p.Spec}, metav1.CreateOptions{})
			if err != nil {
				return fmt.Errorf("create NetworkPolicy %s: %w", key, err)
			}
		} else {
			err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
				obj, err := api.Get(ctx, p.Name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				obj.Spec = p.Spec
				got, err = api.Update(ctx, obj, metav1.UpdateOptions{})
				return err
			})
			if err != nil {
				return fmt.Errorf("update NetworkPolicy %s: %w", key, err)
			}
		}
		r.applied[key] = got
	}
	for _, key := range sortedKeys(r.applied) {
		if _, keep := s.policies[key]; keep {
			continue
		}
		p := r.applied[key]
		err := l.Kube.NetworkingV1().NetworkPolicies(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete NetworkPolicy %s: %w", key, err)
		}
		delete(r.applied, key)
	}
	return nil
}

func agrees(probes []Probe, want map[Probe]Verdict, got map[Probe]Outcome) bool {
	for _, p := range probes {
		g, ok := got[p]
		if !ok || g.OK != want[p].Allowed {
			return false
		}
	}
	return true
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
