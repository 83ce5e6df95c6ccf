package client

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
)

// Leases is the Leases of a namespace (coordination.k8s.io/v1): one holder at a time of a job
// that only one agent of the cluster may do.
func (c *Client) Leases(namespace string) Resource[*coordinationv1.Lease, *coordinationv1.LeaseList] {
	return Resource[*coordinationv1.Lease, *coordinationv1.LeaseList]{c.Coordination, "leases", func() *coordinationv1.Lease { return &coordinationv1.Lease{} }, func() *coordinationv1.LeaseList { return &coordinationv1.LeaseList{} }, namespace, false, c}
}

// Events is the core/v1 Events of a namespace ("": every namespace), what `kubectl describe`
// shows under an object.
func (c *Client) Events(namespace string) Resource[*corev1.Event, *corev1.EventList] {
	return Resource[*corev1.Event, *corev1.EventList]{c.Core, "events", func() *corev1.Event { return &corev1.Event{} }, func() *corev1.EventList { return &corev1.EventList{} }, namespace, false, c}
}

// UpdateStatus replaces obj's status subresource if its resourceVersion is still current
// (Conflict otherwise): the API server takes only the status from the body.
func (r Resource[T, L]) UpdateStatus(ctx context.Context, obj T) (T, error) {
	out := r.newObj()
	req := r.call(r.rest.Put())
	if obj.GetNamespace() != "" && r.namespace == "" {
		// A Resource of every namespace still writes to the object's own.
		req = req.Namespace(obj.GetNamespace())
	}
	err := req.Name(obj.GetName()).SubResource("status").Body(obj).Do(ctx).Into(out)
	return out, err
}
