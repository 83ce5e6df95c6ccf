package controller_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/tabbynet/tabby/internal/lease"
	"github.com/tabbynet/tabby/internal/testwait"
	"github.com/tabbynet/tabby/lbipam/controller"
)

// node is one tabby-node's LoadBalancer IPAM: a candidate for the Lease running the controller
// while it leads, with its own metrics.
type node struct {
	reg  *prometheus.Registry
	stop func()
}

func (s *scene) node(id string) *node {
	n := &node{reg: prometheus.NewRegistry()}
	m := controller.NewMetrics(n.reg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	log := slog.New(slog.NewTextHandler(testWriter{s.t}, nil)).With("node", id)
	go func() {
		defer close(done)
		_ = lease.Run(ctx, lease.Config{Client: s.c, Namespace: s.ns, Name: "tabby-lbipam", Identity: id, Duration: 6 * time.Second, RenewEvery: 2 * time.Second,
			Logger: log, OnLeading: m.SetLeader}, func(ctx context.Context) {
			if err := controller.Run(ctx, controller.Config{Client: s.c, Identity: id, Logger: log, Metrics: m}); err != nil {
				s.t.Errorf("%s: %v", id, err)
			}
		})
	}()
	stopped := false
	n.stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
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

func TestTwoNodesOneWriter(t *testing.T) {
	s := newScene(t, "lb-lease=203.0.113.112/28")
	nodes := []*node{s.node("node-a"), s.node("node-b")}
	for i := range 4 {
		s.create(service(fmt.Sprintf("s%d", i)))
	}
	seen := map[string]bool{}
	for i := range 4 {
		a := s.anyAddr(fmt.Sprintf("s%d", i), 1)[0]
		if seen[a] {
			t.Fatalf("%s handed out twice", a)
		}
		seen[a] = true
	}
	leader, other := nodes[0], nodes[1]
	if leader.metric("tabby_lbipam_leader") != 1 {
		leader, other = other, leader
	}
	if leader.metric("tabby_lbipam_leader") != 1 || other.metric("tabby_lbipam_leader") != 0 {
		t.Fatalf("want one leader: %v %v", leader.metric("tabby_lbipam_leader"), other.metric("tabby_lbipam_leader"))
	}
	testwait.Until(t, "the leader to count its writes", wait, func() bool { return leader.metric("tabby_lbipam_assignments_total") >= 4 })
	if w := leader.metric("tabby_lbipam_assignments_total"); w != 4 {
		t.Fatalf("the leader wrote %v statuses, want 4", w)
	}
	if w := other.metric("tabby_lbipam_assignments_total"); w != 0 {
		t.Fatalf("the node without the Lease wrote %v statuses", w)
	}
	// The leader stops: the other takes over, rebuilds, and hands out no taken address.
	leader.stop()
	testwait.Until(t, "the other node to lead", wait, func() bool { return other.metric("tabby_lbipam_leader") == 1 })
	s.create(service("after"))
	if a := s.anyAddr("after", 1)[0]; seen[a] {
		t.Fatalf("the new leader handed out %s again", a)
	}
	// The counter moves just after the write the API server has already served.
	testwait.Until(t, "the new leader to count its write", wait, func() bool { return other.metric("tabby_lbipam_assignments_total") >= 1 })
	if w := other.metric("tabby_lbipam_assignments_total"); w != 1 {
		t.Fatalf("the new leader wrote %v statuses, want 1 (the old ones stand)", w)
	}
	if _, err := s.c.Leases(s.ns).Get(context.Background(), "tabby-lbipam"); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}
