package client_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	"github.com/tabbynet/tabby/apis/client"
	"github.com/tabbynet/tabby/internal/testenv"
	"github.com/tabbynet/tabby/internal/testwait"
)

// The core kinds, against a real API server: namespaced and cluster-scoped requests, a merge
// patch, a watch and a trimming informer, all through tabby's client (protobuf for the core API).
func TestKubeKinds(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := env.Client

	if _, err := c.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kinds"}}); err != nil {
		t.Fatal(err)
	}
	w, err := c.Pods("").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "kinds", Labels: map[string]string{"app": "a"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "none"}}}}
	if _, err := c.Pods("kinds").Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.ResultChan():
		if p, ok := ev.Object.(*corev1.Pod); ev.Type != watch.Added || !ok || p.Name != "p" {
			t.Fatalf("watch: %v %#v, want the pod added", ev.Type, ev.Object)
		}
	case <-ctx.Done():
		t.Fatal("the watch never saw the pod")
	}
	if got, err := c.Pods("kinds").Get(ctx, "p"); err != nil || got.Labels["app"] != "a" {
		t.Fatalf("get: %v, %v", got, err)
	}
	for _, ns := range []string{"", "kinds"} {
		l, err := c.Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=a"})
		if err != nil || len(l.Items) != 1 {
			t.Fatalf("list in %q: %v, %v", ns, l, err)
		}
	}
	if _, err := c.Pods("").Create(ctx, pod); err == nil {
		t.Error("a pod created in no namespace")
	}

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "kinds-n0"}}
	if _, err := c.Nodes().Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	patched, err := c.Nodes().Patch(ctx, "kinds-n0", types.MergePatchType, []byte(`{"metadata":{"annotations":{"tabby.dev/x":"1"}}}`))
	if err != nil || patched.Annotations["tabby.dev/x"] != "1" {
		t.Fatalf("patch: %v, %v", patched, err)
	}

	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "deny", Namespace: "kinds"}}
	if _, err := c.NetworkPolicies("kinds").Create(ctx, np); err != nil {
		t.Fatal(err)
	}
	inf := client.Informer(c.NetworkPolicies(""), func(obj any) (any, error) {
		p := obj.(*networkingv1.NetworkPolicy)
		p.Labels = map[string]string{"trimmed": "yes"}
		return p, nil
	})
	go inf.RunWithContext(ctx)
	testwait.Until(t, "the informer's first list", 30*time.Second, inf.HasSynced)
	obj, ok, _ := inf.GetStore().GetByKey("kinds/deny")
	if !ok || obj.(*networkingv1.NetworkPolicy).Labels["trimmed"] != "yes" {
		t.Fatalf("informer holds %v (%v), want the trimmed policy", obj, ok)
	}
}

// A watch outlives the client's request timeout: the timeout bounds requests, not watches (as
// the HTTP client's timeout, it would make every informer of every agent watch again each time).
func TestWatchOutlivesRequestTimeout(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := rest.CopyConfig(env.Config)
	cfg.Timeout = time.Second
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.Nodes().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	// Three times the timeout with nothing to send: the watch must stay open through it.
	select {
	case ev, ok := <-w.ResultChan():
		t.Fatalf("the watch ended (%v, open %v) within three times the request timeout", ev.Type, ok)
	case <-time.After(3 * cfg.Timeout):
	}
	if _, err := c.Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "late"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev, ok := <-w.ResultChan():
		if !ok || ev.Type != watch.Added {
			t.Fatalf("after the timeout: %v (open %v), want the node added", ev.Type, ok)
		}
	case <-ctx.Done():
		t.Fatal("the watch never saw the node")
	}
}
