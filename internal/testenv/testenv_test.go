package testenv

import (
	"context"
	"runtime"
	"testing"
	"time"

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
