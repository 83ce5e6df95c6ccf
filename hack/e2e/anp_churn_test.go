package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	anpv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"

	"github.com/tabbynet/tabby/felix/policy"
	"github.com/tabbynet/tabby/hack/lab"
)

// streamPort is where the churn test's pods echo streams, on both families.
const streamPort = 8080

// TestAdminPolicyChurn: AdminNetworkPolicies are created, deleted and edited for about 25 s
// (unrelated policies, priorities moved, Pass rules added and removed) while, in both
// families, a long-lived TCP connection and a steady stream of new connections run from a
// client to a server on another node that the policies allow throughout, and a guest, which
// an AdminNetworkPolicy Deny and the BaselineAdminNetworkPolicy both keep out, probes the same
// server. No edit changes either verdict, so at no moment may the long-lived connection stop
// exchanging data, a new connection of the allowed pair fail, or a guest probe get an answer.
// A new connection gets 900 ms: less than TCP's first SYN retransmission (1 s), so a SYN
// dropped while a chain is rewritten shows instead of hiding behind the retransmission.
func TestAdminPolicyChurn(t *testing.T) {
	l := startLab(t, lab.Options{Families: lab.DualStack})
	ctx := testCtx(t, 6*time.Minute)
	nodes := addNodes(t, ctx, l, nodeSpecs(2)...)
	for _, ns := range []string{"front", "back", "guest", "other"} {
		if err := l.EnsureNamespace(ctx, ns, map[string]string{"anp-e2e": ns}); err != nil {
			t.Fatal(err)
		}
	}
	pods, err := l.AddPods(ctx,
		lab.PodSpec{Name: "client", Namespace: "front", Node: nodes[0].Name},
		lab.PodSpec{Name: "guest", Namespace: "guest", Node: nodes[0].Name},
		lab.PodSpec{Name: "server", Namespace: "back", Node: nodes[1].Name},
		lab.PodSpec{Name: "bystander", Namespace: "other", Node: nodes[1].Name})
	if err != nil {
		t.Fatal(err)
	}
	client, guest, server := pods[0], pods[1], pods[2]
	srv, err := lab.StartStreamServer(server.NS, streamPort)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	dsts := []netip.AddrPort{netip.AddrPortFrom(server.IP, streamPort), netip.AddrPortFrom(server.IP6, streamPort)}
	requireReach(t, ctx, "pod to pod, IPv4", podEndpoints(pods), podEndpoints(pods), 45*time.Second)
	requireReach(t, ctx, "pod to pod, IPv6", l.PodEndpoints6(), l.PodEndpoints6(), 45*time.Second)

	anps := l.Client.AdminNetworkPolicies()
	ns := func(name string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"anp-e2e": name}}
	}
	from := func(name string) []anpv1alpha1.AdminNetworkPolicyIngressPeer {
		return []anpv1alpha1.AdminNetworkPolicyIngressPeer{{Namespaces: ns(name)}}
	}
	// guard keeps the guest out and lets the client in; the baseline keeps the guest out too,
	// so a Pass of the guest above guard changes nothing, nor does a Pass of the client (no
	// NetworkPolicy, and the baseline does not deny it).
	guard := &anpv1alpha1.AdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "guard"}, Spec: anpv1alpha1.AdminNetworkPolicySpec{
		Priority: 50, Subject: anpv1alpha1.AdminNetworkPolicySubject{Namespaces: ns("back")},
		Ingress: []anpv1alpha1.AdminNetworkPolicyIngressRule{
			{Name: "client", Action: "Allow", From: from("front")},
			{Name: "guest", Action: "Deny", From: from("guest")},
		}}}
	banp := &anpv1alpha1.BaselineAdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: anpv1alpha1.BaselineAdminNetworkPolicySpec{
		Subject: anpv1alpha1.AdminNetworkPolicySubject{Namespaces: ns("back")},
		Ingress: []anpv1alpha1.BaselineAdminNetworkPolicyIngressRule{{Name: "guest", Action: "Deny", From: from("guest")}}}}
	if _, err := anps.Create(ctx, guard); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Client.BaselineAdminNetworkPolicies().Create(ctx, banp); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		list, err := anps.List(ctx, metav1.ListOptions{})
		if err == nil {
			for _, o := range list.Items {
				_ = anps.Delete(ctx, o.Name, metav1.DeleteOptions{})
			}
		}
		_ = l.Client.BaselineAdminNetworkPolicies().Delete(ctx, "default", metav1.DeleteOptions{})
	})

	// The verdicts hold, twice in a row, before anything runs.
	held := 0
	err = lab.Eventually(ctx, 30*time.Second, func(ctx context.Context) error {
		var bad []string
		for _, d := range dsts {
			if err := exchangeOnce(ctx, client.NS, d, 900*time.Millisecond); err != nil {
				bad = append(bad, fmt.Sprintf("client -> %s: %v", d, err))
			}
			if err := exchangeOnce(ctx, guest.NS, d, 300*time.Millisecond); err == nil {
				bad = append(bad, fmt.Sprintf("guest -> %s answered", d))
			}
		}
		if len(bad) > 0 {
			held = 0
			return errors.New(strings.Join(bad, "; "))
		}
		if held++; held < 2 {
			return errors.New("held once")
		}
		return nil
	})
	if err != nil {
		t.Fatalf("the admin policies are not enforced before the churn: %v", err)
	}

	var (
		mu         sync.Mutex
		violations []string
		counts     = map[string]int{}
		maxRTT     time.Duration
	)
	violation := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		violations = append(violations, time.Now().Format("15:04:05.000 ")+fmt.Sprintf(format, args...))
	}
	count := func(what string, rtt time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		counts[what]++
		maxRTT = max(maxRTT, rtt)
	}
	stop := make(chan struct{})
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	var wg sync.WaitGroup
	for _, d := range dsts {
		fam := "IPv4"
		if d.Addr().Is6() {
			fam = "IPv6"
		}
		// The long-lived connection: a line every 20 ms, each echoed within 2 s.
		conn, err := lab.DialTCP(ctx, client.NS, d)
		if err != nil {
			t.Fatalf("long-lived connection to %s: %v", d, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conn.Close()
			r := bufio.NewReader(conn)
			for i := 0; !stopped(); i++ {
				began := time.Now()
				_ = conn.SetDeadline(began.Add(2 * time.Second))
				msg := fmt.Sprintf("line %d\n", i)
				if _, err := io.WriteString(conn, msg); err != nil {
					violation("%s long-lived connection: write: %v", fam, err)
					return
				}
				got, err := r.ReadString('\n')
				if err != nil || got != msg {
					violation("%s long-lived connection: read %q: %v", fam, got, err)
					return
				}
				count(fam+" long-lived exchanges", time.Since(began))
				time.Sleep(20 * time.Millisecond)
			}
		}()
		// New connections of the allowed pair, and probes of the guest, back to back.
		for _, c := range []struct {
			who     *lab.Pod
			allowed bool
		}{{client, true}, {guest, false}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stopped() {
					began := time.Now()
					if c.allowed {
						if err := exchangeOnce(ctx, c.who.NS, d, 900*time.Millisecond); err != nil {
							violation("%s new connection %s -> %s failed after %s: %v", fam, c.who.Key(), d, time.Since(began).Round(time.Millisecond), err)
						} else {
							count(fam+" new connections", time.Since(began))
						}
					} else {
						if err := exchangeOnce(ctx, c.who.NS, d, 300*time.Millisecond); err == nil {
							violation("%s guest %s -> %s answered", fam, c.who.Key(), d)
						} else {
							count(fam+" guest probes refused", 0)
						}
					}
					time.Sleep(10 * time.Millisecond)
				}
			}()
		}
	}

	edits, churnErr := churnAdminPolicies(ctx, t, l, 25*time.Second, ns, from)
	close(stop)
	wg.Wait()
	if churnErr != nil {
		t.Fatal(churnErr)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d API edits in 25 s; traffic: %v; slowest exchange %s", edits, counts, maxRTT.Round(time.Millisecond))
	for what, least := range map[string]int{"IPv4 long-lived exchanges": 50, "IPv6 long-lived exchanges": 50, "IPv4 new connections": 50, "IPv6 new connections": 50,
		"IPv4 guest probes refused": 20, "IPv6 guest probes refused": 20} {
		if counts[what] < least {
			t.Errorf("only %d %s in the churn: the test proved little", counts[what], what)
		}
	}
	if len(violations) > 0 {
		if len(violations) > 40 {
			violations = append(violations[:40], fmt.Sprintf("… and %d more", len(violations)-40))
		}
		t.Fatalf("while admin policies churned:\n%s", strings.Join(violations, "\n"))
	}

	// The status writer kept up: guard, as last edited, is accepted.
	err = lab.Eventually(ctx, 30*time.Second, func(ctx context.Context) error {
		g, err := anps.Get(ctx, "guard")
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(g.Status.Conditions, policy.ConditionAccepted)
		if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != g.Generation {
			return fmt.Errorf("guard generation %d: Accepted %+v", g.Generation, c)
		}
		return nil
	})
	if err != nil {
		t.Errorf("status: %v", err)
	}
}

// churnAdminPolicies edits AdminNetworkPolicies for d without changing whether the client may
// reach the server or the guest may not: unrelated policies come and go (some sharing a
// priority), guard's priority moves, and Pass rules for the guest and for the client appear and
// disappear above and below guard. It returns how many edits the API server took.
func churnAdminPolicies(ctx context.Context, t *testing.T, l *lab.Lab, d time.Duration, ns func(string) *metav1.LabelSelector,
	from func(string) []anpv1alpha1.AdminNetworkPolicyIngressPeer) (int, error) {
	anps := l.Client.AdminNetworkPolicies()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 38))
	edits := 0
	end := time.Now().Add(d)
	for i := 0; time.Now().Before(end); i++ {
		var err error
		switch i % 5 {
		case 0: // an unrelated policy, at a priority another may have
			name := fmt.Sprintf("noise-%d", rng.IntN(6))
			_, err = anps.Create(ctx, &anpv1alpha1.AdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: anpv1alpha1.AdminNetworkPolicySpec{
				Priority: int32(100 + 10*rng.IntN(4)), Subject: anpv1alpha1.AdminNetworkPolicySubject{Namespaces: ns("other")},
				Ingress: []anpv1alpha1.AdminNetworkPolicyIngressRule{{Action: "Deny", From: []anpv1alpha1.AdminNetworkPolicyIngressPeer{{Namespaces: &metav1.LabelSelector{}}}}}}})
			if apierrors.IsAlreadyExists(err) {
				err = anps.Delete(ctx, name, metav1.DeleteOptions{})
			}
		case 1: // guard moves
			err = editANP(ctx, l, "guard", func(s *anpv1alpha1.AdminNetworkPolicySpec) { s.Priority = int32(40 + 5*rng.IntN(5)) })
		case 2: // Pass for the guest above guard: the baseline denies it then
			err = togglePass(ctx, l, "pass-guest", 10, ns, from("guest"))
		case 3: // Pass for the client, above or below guard: no NetworkPolicy, the baseline allows it
			err = togglePass(ctx, l, "pass-client", int32(30+40*rng.IntN(2)), ns, from("front"))
		case 4: // a rule added to or removed from guard's end that matches neither pod
			err = editANP(ctx, l, "guard", func(s *anpv1alpha1.AdminNetworkPolicySpec) {
				if len(s.Ingress) > 2 {
					s.Ingress = s.Ingress[:2]
					return
				}
				s.Ingress = append(s.Ingress, anpv1alpha1.AdminNetworkPolicyIngressRule{Name: "others", Action: "Pass", From: from("other")})
			})
		}
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return edits, fmt.Errorf("edit %d: %w", i, err)
		}
		edits++
		time.Sleep(100 * time.Millisecond)
	}
	return edits, nil
}

func editANP(ctx context.Context, l *lab.Lab, name string, edit func(*anpv1alpha1.AdminNetworkPolicySpec)) error {
	o, err := l.Client.AdminNetworkPolicies().Get(ctx, name)
	if err != nil {
		return err
	}
	edit(&o.Spec)
	_, err = l.Client.AdminNetworkPolicies().Update(ctx, o)
	return err
}

// togglePass creates name (a Pass of peers into back at prio) or deletes it if it exists.
func togglePass(ctx context.Context, l *lab.Lab, name string, prio int32, ns func(string) *metav1.LabelSelector, peers []anpv1alpha1.AdminNetworkPolicyIngressPeer) error {
	_, err := l.Client.AdminNetworkPolicies().Create(ctx, &anpv1alpha1.AdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: anpv1alpha1.AdminNetworkPolicySpec{
		Priority: prio, Subject: anpv1alpha1.AdminNetworkPolicySubject{Namespaces: ns("back")},
		Ingress: []anpv1alpha1.AdminNetworkPolicyIngressRule{{Name: "pass", Action: "Pass", From: peers}}}})
	if apierrors.IsAlreadyExists(err) {
		return l.Client.AdminNetworkPolicies().Delete(ctx, name, metav1.DeleteOptions{})
	}
	return err
}

// exchangeOnce connects to dst from netns, exchanges one line and closes, within timeout.
func exchangeOnce(ctx context.Context, netns string, dst netip.AddrPort, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := lab.DialTCP(ctx, netns, dst)
	if err != nil {
		return err
	}
	defer c.Close()
	deadline, _ := ctx.Deadline()
	_ = c.SetDeadline(deadline)
	if _, err := io.WriteString(c, "hello\n"); err != nil {
		return err
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if got != "hello\n" {
		return fmt.Errorf("answer %q", got)
	}
	return nil
}
