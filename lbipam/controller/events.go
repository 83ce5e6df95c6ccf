package controller

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// event tells the Service why (core/v1 Events, what `kubectl describe service` shows), once per
// message: a retry that comes to the same conclusion says nothing new.
func (c *Controller) event(ctx context.Context, svc *corev1.Service, typ, reason, msg string) {
	key := svc.Namespace + "/" + svc.Name
	if c.said[key] == reason+msg {
		return
	}
	c.said[key] = reason + msg
	now := metav1.NewTime(time.Now())
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: svc.Name + ".", Namespace: svc.Namespace},
		InvolvedObject: corev1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: svc.Namespace, Name: svc.Name,
			UID: svc.UID, ResourceVersion: svc.ResourceVersion},
		Reason: reason, Message: msg, Type: typ, Count: 1,
		FirstTimestamp: now, LastTimestamp: now,
		Source:              corev1.EventSource{Component: Component, Host: c.cfg.Identity},
		ReportingController: "tabby.dev/lbipam", ReportingInstance: c.cfg.Identity,
	}
	if _, err := c.cfg.Client.Events(svc.Namespace).Create(ctx, ev); err != nil {
		// The decision stands without its event; the next different one is tried again.
		c.log.Warn("LoadBalancer IPAM: cannot write an event", "service", key, "reason", reason, "message", msg, "error", err)
		delete(c.said, key)
	}
}
