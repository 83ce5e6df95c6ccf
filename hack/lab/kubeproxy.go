package lab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/internal/proc"
	"github.com/tabbynet/tabby/internal/testenv"
)

// StartKubeProxy runs kube-proxy (iptables mode) in node n's namespace, as the kube-proxy
// DaemonSet beside tabby-node does in a cluster: pods on n reach Services' ClusterIPs through
// its DNAT. The lab runs no EndpointSlice controller: WriteEndpointSlices stands in for it.
// kube-proxy stops with the lab; it returns once kube-proxy has written its Service chains.
func (l *Lab) StartKubeProxy(ctx context.Context, n *Node) error {
	bin := filepath.Join(testenv.BinDir(), "kube-proxy")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("kube-proxy: %w (run `make controlplane`)", err)
	}
	cfg := filepath.Join(n.Dir, "kube-proxy.yaml")
	if err := os.WriteFile(cfg, []byte(kubeProxyConfig(n, l.Opts.Families)), 0o644); err != nil {
		return err
	}
	p, err := proc.Start("kube-proxy", []string{"ip", "netns", "exec", n.NS, bin, "--config=" + cfg, "--v=1"},
		proc.Options{Log: filepath.Join(n.Dir, "kube-proxy.log"), Header: "lab: start kube-proxy"})
	if err != nil {
		return fmt.Errorf("node %s: kube-proxy: %w", n.Name, err)
	}
	l.onClose(func(context.Context) error { return p.Stop(syscall.SIGTERM, 5*time.Second) })
	return Eventually(ctx, time.Minute, func(ctx context.Context) error {
		if !p.Running() {
			return Stop(fmt.Errorf("node %s: kube-proxy exited: %s", n.Name, TailFile(filepath.Join(n.Dir, "kube-proxy.log"), 10)))
		}
		out, err := n.Exec(ctx, "iptables", "-w", "-t", "nat", "-S", "KUBE-SERVICES")
		if err != nil {
			return fmt.Errorf("node %s: kube-proxy's chains not there yet: %v %s", n.Name, err, strings.TrimSpace(out))
		}
		return nil
	})
}

func kubeProxyConfig(n *Node, f Families) string {
	cidrs := []string{}
	if f.IPv4Pods() {
		cidrs = append(cidrs, PodCIDR.String())
	}
	if f.IPv6() {
		cidrs = append(cidrs, PodCIDR6.String())
	}
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
hostnameOverride: %s
clientConnection: {kubeconfig: %s}
clusterCIDR: %s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# The conntrack table size and timeouts are the machine's, not the node's: leave them.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, n.Name, n.Kubeconfig, strings.Join(cidrs, ","))
}

// WriteEndpointSlices writes what the EndpointSlice controller would for a Service of
// PodNamespace whose endpoints are pods: a slice per address family of the Service, each pod
// ready, the Service's ports with their target port numbers.
func (l *Lab) WriteEndpointSlices(ctx context.Context, svc *corev1.Service, pods []*Pod) error {
	var ports []discoveryv1.EndpointPort
	for _, sp := range svc.Spec.Ports {
		name, proto, port := sp.Name, sp.Protocol, sp.TargetPort.IntVal
		if port == 0 {
			port = sp.Port
		}
		ports = append(ports, discoveryv1.EndpointPort{Name: &name, Protocol: &proto, Port: &port})
	}
	ready := true
	for _, fam := range svc.Spec.IPFamilies {
		v6 := fam == corev1.IPv6Protocol
		at := discoveryv1.AddressTypeIPv4
		if v6 {
			at = discoveryv1.AddressTypeIPv6
		}
		var eps []discoveryv1.Endpoint
		for _, p := range pods {
			a := p.IP
			if v6 {
				a = p.IP6
			}
			if !a.IsValid() || a.Is6() != v6 {
				return fmt.Errorf("endpoints of Service %s: pod %s has no %s address", svc.Name, p.Key(), fam)
			}
			node := p.Node.Name
			eps = append(eps, discoveryv1.Endpoint{
				Addresses: []string{a.String()}, NodeName: &node,
				Conditions: discoveryv1.EndpointConditions{Ready: &ready},
				TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.obj.UID},
			})
		}
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{
				Name: svc.Name + "-" + strings.ToLower(string(fam)), Namespace: svc.Namespace,
				Labels: map[string]string{discoveryv1.LabelServiceName: svc.Name, discoveryv1.LabelManagedBy: "tabby-lab"},
			},
			AddressType: at, Endpoints: eps, Ports: ports,
		}
		slices := l.Kube.DiscoveryV1().EndpointSlices(svc.Namespace)
		if _, err := slices.Create(ctx, slice, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
			old, err := slices.Get(ctx, slice.Name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("EndpointSlice %s: %w", slice.Name, err)
			}
			slice.ResourceVersion = old.ResourceVersion
			if _, err := slices.Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("EndpointSlice %s: %w", slice.Name, err)
			}
		} else if err != nil {
			return fmt.Errorf("EndpointSlice %s: %w", slice.Name, err)
		}
	}
	return nil
}
