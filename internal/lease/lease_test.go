package lease_test

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/client"
	"github.com/tabbynet/tabby/internal/lease"
	"github.com/tabbynet/tabby/internal/testenv"
	"github.com/tabbynet/tabby/internal/testwait"
)

const ns = "tabby-system"

// leaders counts the candidates leading at once, and the most ever seen.
type leaders struct {
	now, max atomic.Int32
	who      sync.Map
}

func (l *leaders) candidate(t *testing.T, c *client.Client, name, id string, d time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := lease.Run(ctx, lease.Config{Client: c, Namespace: ns, Name: name, Identity: id, Duration: d, RenewEvery: d / 3, Logger: slog.Default()},
			func(ctx context.Context) {
				n := l.now.Add(1)
				for m := l.max.Load(); n > m && !l.max.CompareAndSwap(m, n); m = l.max.Load() {
				}
				l.who.Store(id, true)
				<-ctx.Done()
				l.who.Delete(id)
				l.now.Add(-1)
			})
		if err != nil {
			t.Errorf("%s: %v", id, err)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

func (l *leaders) leading(id string) bool { _, ok := l.who.Load(id); return ok }

func TestLease(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a real API server (skipped with -short)")
	}
	e := testenv.Start(t)
	if _, err := e.Client.Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}

	t.Run("one leader, handed over when it stops", func(t *testing.T) {
		var l leaders
		stopA := l.candidate(t, e.Client, "handover", "a", 3*time.Second)
		testwait.Until(t, "a to lead", 30*time.Second, func() bool { return l.leading("a") })
		l.candidate(t, e.Client, "handover", "b", 3*time.Second)
		l.candidate(t, e.Client, "handover", "c", 3*time.Second)
		stopA()
		testwait.Until(t, "b or c to lead", 30*time.Second, func() bool { return l.leading("b") || l.leading("c") })
		if m := l.max.Load(); m != 1 {
			t.Fatalf("%d candidates led at once", m)
		}
	})

	t.Run("a holder that finds another in the Lease steps down", func(t *testing.T) {
		var l leaders
		l.candidate(t, e.Client, "intruded", "a", 3*time.Second)
		testwait.Until(t, "a to lead", 30*time.Second, func() bool { return l.leading("a") })
		intruder := "intruder"
		testwait.Until(t, "the intruder to write itself into the Lease", 30*time.Second, func() bool {
			got, err := e.Client.Leases(ns).Get(context.Background(), "intruded")
			if err != nil {
				return false
			}
			now := metav1.NewMicroTime(time.Now())
			got.Spec.HolderIdentity, got.Spec.RenewTime = &intruder, &now
			_, err = e.Client.Leases(ns).Update(context.Background(), got)
			return err == nil
		})
		testwait.Until(t, "a to step down", 30*time.Second, func() bool { return !l.leading("a") })
	})

	t.Run("a holder that stops renewing is replaced only after the lease duration", func(t *testing.T) {
		ghost, secs := "ghost", int32(4)
		now := metav1.NewMicroTime(time.Now())
		if _, err := e.Client.Leases(ns).Create(context.Background(), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "expiry", Namespace: ns},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &ghost, LeaseDurationSeconds: &secs, RenewTime: &now, AcquireTime: &now}}); err != nil {
			t.Fatal(err)
		}
		var l leaders
		start := time.Now()
		l.candidate(t, e.Client, "expiry", "b", 3*time.Second)
		testwait.Until(t, "b to take the expired Lease", 60*time.Second, func() bool { return l.leading("b") })
		if waited := time.Since(start); waited < 4*time.Second {
			t.Fatalf("b took a Lease renewed %v ago, within its 4s duration", waited)
		}
		got, err := e.Client.Leases(ns).Get(context.Background(), "expiry")
		if err != nil {
			t.Fatal(err)
		}
		if *got.Spec.HolderIdentity != "b" || got.Spec.LeaseTransitions == nil || *got.Spec.LeaseTransitions != 1 {
			t.Fatalf("lease %+v", got.Spec)
		}
	})
}
