package netpol

import (
	"context"
	"fmt"
	"net/netip"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/tabbynet/tabby/hack/lab"
)

// The truth-table cluster, after the upstream Kubernetes NetworkPolicy e2e tests: namespaces
// x, y, z, each with pods a, b, c, every pod serving 80 and 81 over TCP and UDP (and naming
// 80 and 81 over SCTP, which policies may mention but the lab cannot probe).
//
// The extras beyond upstream's pod=<name> and ns=<name> labels make selectors disagree with
// each other: a tier that c lacks (so `tier NotIn (…)` and DoesNotExist select c), an env that
// z lacks, and port names that differ per pod (c names its 80/TCP "web", not serve-80-tcp; a
// names 81/TCP "dns" and b names 81/UDP "dns"), so a named port resolves differently per
// destination and only with the rule's protocol.
var (
	Namespaces = []string{"x", "y", "z"}
	PodNames   = []string{"a", "b", "c"}
)

// BaseNamespaceLabels are a namespace's labels before any case changes them (the API server
// adds kubernetes.io/metadata.name).
func BaseNamespaceLabels(ns string) map[string]string {
	l := map[string]string{"ns": ns}
	switch ns {
	case "x":
		l["env"] = "prod"
	case "y":
		l["env"] = "dev"
	}
	return l
}

// BasePodLabels are a pod's labels before any case changes them.
func BasePodLabels(name string) map[string]string {
	l := map[string]string{"pod": name}
	switch name {
	case "a":
		l["tier"] = "frontend"
	case "b":
		l["tier"] = "backend"
	}
	return l
}

// PodPorts are a pod's container ports.
func PodPorts(name string) []corev1.ContainerPort {
	n := map[string]string{
		"80/TCP": "serve-80-tcp", "81/TCP": "serve-81-tcp", "80/UDP": "serve-80-udp",
		"81/UDP": "serve-81-udp", "80/SCTP": "serve-80-sctp", "81/SCTP": "serve-81-sctp",
	}
	switch name {
	case "a":
		n["81/TCP"] = "dns"
	case "b":
		n["81/UDP"] = "dns"
	case "c":
		n["80/TCP"] = "web"
	}
	var ps []corev1.ContainerPort
	for _, proto := range []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP} {
		for _, port := range []int32{80, 81} {
			ps = append(ps, corev1.ContainerPort{Name: n[fmt.Sprintf("%d/%s", port, proto)], ContainerPort: port, Protocol: proto})
		}
	}
	return ps
}

// World is the truth-table cluster in a lab.
type World struct {
	Lab  *lab.Lab
	Pods []*lab.Pod // by key, "x/a" … "z/c"
	// Protocols are what the probes use: TCP and UDP (SCTP only where the lab can probe it).
	Protocols []corev1.Protocol
	Ports     []int32
	// SCTPSkipped says why SCTP is not probed ("" if it is).
	SCTPSkipped string
}

// NewWorld creates the namespaces and the nine pods, spread over nodes so that some pairs
// share a node and some do not: pod j of namespace i goes on node (i+j) mod len(nodes).
func NewWorld(ctx context.Context, l *lab.Lab, nodes []*lab.Node) (*World, error) {
	for _, ns := range Namespaces {
		if err := l.EnsureNamespace(ctx, ns, BaseNamespaceLabels(ns)); err != nil {
			return nil, err
		}
	}
	var specs []lab.PodSpec
	for i, ns := range Namespaces {
		for j, name := range PodNames {
			specs = append(specs, lab.PodSpec{
				Name: name, Namespace: ns, Node: nodes[(i+j)%len(nodes)].Name,
				Labels: BasePodLabels(name), Ports: PodPorts(name), Serve: true,
			})
		}
	}
	pods, err := l.AddPods(ctx, specs...)
	if err != nil {
		return nil, err
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].Key() < pods[j].Key() })
	w := &World{Lab: l, Pods: pods, Protocols: []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP}, Ports: []int32{80, 81}}
	if ok, why := lab.SCTPSupport(); ok {
		w.Protocols = append(w.Protocols, corev1.ProtocolSCTP)
	} else {
		w.SCTPSkipped = why
	}
	return w, nil
}

// Pod returns a pod by key ("x/a").
func (w *World) Pod(key string) *lab.Pod {
	for _, p := range w.Pods {
		if p.Key() == key {
			return p
		}
	}
	return nil
}

// IP is a pod's address; it panics on an unknown key (a case written wrong).
func (w *World) IP(key string) netip.Addr {
	p := w.Pod(key)
	if p == nil {
		panic("netpol: no pod " + key)
	}
	return p.IP
}

// Probe is one connection the matrix tries: pod to pod, port, protocol.
type Probe struct {
	From, To string // pod keys
	Port     int32
	Protocol corev1.Protocol
}

func (p Probe) String() string {
	return fmt.Sprintf("%s -> %s %d/%s", p.From, p.To, p.Port, p.Protocol)
}

// Probes are every ordered pair of distinct pods on every port and protocol. A pod's traffic
// to itself is left out: it never leaves the pod's namespace, and Kubernetes leaves its fate
// to the implementation (the upstream tests ignore it too).
func (w *World) Probes() []Probe {
	var ps []Probe
	for _, proto := range w.Protocols {
		for _, port := range w.Ports {
			for _, from := range w.Pods {
				for _, to := range w.Pods {
					if from != to {
						ps = append(ps, Probe{From: from.Key(), To: to.Key(), Port: port, Protocol: proto})
					}
				}
			}
		}
	}
	return ps
}
