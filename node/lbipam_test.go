package node

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/tabbynet/tabby/apis/v1"
	"github.com/tabbynet/tabby/internal/testenv"
	"github.com/tabbynet/tabby/internal/testwait"
	"github.com/tabbynet/tabby/lbipam/controller"
)

// tabby-node takes the LoadBalancer IPAM Lease in its namespace, assigns a Service its address,
// says so in its metrics, and hands the Lease back when it stops.
func TestLBIPAM(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a real API server")
	}
	env := testenv.Start(t)
	ctx := context.Background()
	const ns = "tabby-system"
	if _, err := env.Client.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.IPPools().Create(ctx, &v1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "lb"},
		Spec: v1.IPPoolSpec{CIDR: "198.51.100.240/28", AllowedUses: []v1.IPPoolUse{v1.IPPoolUseLoadBalancer}}}); err != nil {
		t.Fatal(err)
	}
	a := &Agent{cfg: Config{NodeName: "lb-a", Namespace: ns}, log: slog.Default(), client: env.Client, reg: prometheus.NewRegistry()}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.runLBIPAM(runCtx, controller.NewMetrics(a.reg)) }()
	defer func() {
		stop()
		<-done
	}()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
		Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}}}
	if _, err := env.Client.Services("default").Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "the Service to get 198.51.100.240", 60*time.Second, func() bool {
		s, err := env.Client.Services("default").Get(ctx, "web")
		return err == nil && len(s.Status.LoadBalancer.Ingress) == 1 && s.Status.LoadBalancer.Ingress[0].IP == "198.51.100.240"
	})
	l, err := env.Client.Leases(ns).Get(ctx, LBIPAMLease)
	if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != "lb-a" {
		t.Fatalf("Lease %s/%s: %+v %v", ns, LBIPAMLease, l.Spec, err)
	}
	if n, err := testutil.GatherAndCount(a.reg, "tabby_lbipam_leader", "tabby_lbipam_addresses_in_use"); err != nil || n != 2 {
		t.Fatalf("metrics: %d series, %v", n, err)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	done <- nil
	if l, err = env.Client.Leases(ns).Get(ctx, LBIPAMLease); err != nil || l.Spec.HolderIdentity != nil {
		t.Fatalf("a stopped node must hand the Lease back: %+v %v", l.Spec, err)
	}
}
