package testenv

import (
	"context"
	"testing"

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
