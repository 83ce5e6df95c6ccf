package testenv

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestStartServesCRDs(t *testing.T) {
	env := Start(t)
	pools, err := env.Client.IPPools().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list ippools: %v", err)
	}
	if len(pools.Items) != 0 {
		t.Fatalf("a fresh control plane has %d pools", len(pools.Items))
	}
}

// A goroutine that exits while locked to its thread ends that thread; the control plane must not
// die with it (Pdeathsig follows the forking thread).
func TestSurvivesExitedLockedThreads(t *testing.T) {
	done := make(chan *Env)
	go func() {
		runtime.LockOSThread() // exits locked: Go terminates this thread
		done <- Start(t)
	}()
	env := <-done
	// Make sure the thread is really gone before we look, then use the API server a while.
	for i := range 20 {
		if _, err := env.Client.IPPools().List(context.Background(), metav1.ListOptions{}); err != nil {
			t.Fatalf("API server gone after the forking goroutine's thread ended (try %d): %v", i, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestEtcdLatency: with the relay, every write waits at least the latency set; without it the
// control plane refuses to pretend; zero ends it.
func TestEtcdLatency(t *testing.T) {
	env := Start(t, Options{EtcdRelay: true})
	ctx := context.Background()
	write := func(name string) time.Duration {
		t.Helper()
		start := time.Now()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
		if _, err := env.Kube.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create ConfigMap %s: %v", name, err)
		}
		return time.Since(start)
	}
	write("warm")
	const d = 500 * time.Millisecond
	if err := env.SetEtcdLatency(d); err != nil {
		t.Fatal(err)
	}
	if took := write("slow"); took < d {
		t.Errorf("a write with etcd %s away took %s", d, took)
	} else {
		t.Logf("etcd +%s: a ConfigMap created in %s", d, took.Round(time.Millisecond))
	}
	if err := env.SetEtcdLatency(0); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if took := write(fmt.Sprintf("fast-%d", i)); took < d {
			break
		} else if i == 10 {
			t.Fatalf("latency removed, writes still take %s", took)
		}
	}
	plain := Start(t)
	if err := plain.SetEtcdLatency(d); err == nil {
		t.Error("SetEtcdLatency without Options.EtcdRelay: no error")
	}
}
