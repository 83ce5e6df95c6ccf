package lab

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// EnsureNamespace creates the Kubernetes namespace with the given labels, or, if it exists,
// adds the labels to it (overwriting those keys, keeping the others).
func (l *Lab) EnsureNamespace(ctx context.Context, name string, labels map[string]string) error {
	obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: maps.Clone(labels)}}
	_, err := l.Kube.CoreV1().Namespaces().Create(ctx, obj, metav1.CreateOptions{})
	if err == nil {
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	if len(labels) == 0 {
		return nil
	}
	return l.updateNamespaceLabels(ctx, name, func(cur map[string]string) map[string]string {
		if cur == nil {
			cur = map[string]string{}
		}
		maps.Copy(cur, labels)
		return cur
	})
}

// SetNamespaceLabels replaces the namespace's labels. The API server keeps
// kubernetes.io/metadata.name whatever the labels say.
func (l *Lab) SetNamespaceLabels(ctx context.Context, name string, labels map[string]string) error {
	return l.updateNamespaceLabels(ctx, name, func(map[string]string) map[string]string { return maps.Clone(labels) })
}

// NamespaceLabels are the namespace's labels as the API server holds them.
func (l *Lab) NamespaceLabels(ctx context.Context, name string) (map[string]string, error) {
	ns, err := l.Kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get namespace %s: %w", name, err)
	}
	return ns.Labels, nil
}

func (l *Lab) updateNamespaceLabels(ctx context.Context, name string, change func(map[string]string) map[string]string) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ns, err := l.Kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		ns.Labels = change(ns.Labels)
		_, err = l.Kube.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("set labels of namespace %s: %w", name, err)
	}
	return nil
}

// SetPodLabels replaces the labels of a pod (by key, see Pod.Key) in its Pod object.
func (l *Lab) SetPodLabels(ctx context.Context, key string, labels map[string]string) error {
	p := l.Pod(key)
	if p == nil {
		return fmt.Errorf("set labels: no pod %s", key)
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj, err := l.Kube.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		obj.Labels = maps.Clone(labels)
		_, err = l.Kube.CoreV1().Pods(p.Namespace).Update(ctx, obj, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("set labels of pod %s: %w", key, err)
	}
	p.mu.Lock()
	p.labels = maps.Clone(labels)
	p.mu.Unlock()
	return nil
}
