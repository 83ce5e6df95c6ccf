package lab

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PowerOff is a power cut of a node: its link goes dark first (its peers hear nothing, not
// even a TCP FIN), then tabby-node, its pods' namespaces and its own namespace are gone at
// once, without a CNI DEL, and its run directory (a tmpfs on a real node) is emptied. The
// Node and Pod objects stay, as they do in the cluster; the pods it ran are returned for
// RestartPod after PowerOn.
func (l *Lab) PowerOff(ctx context.Context, name string) ([]*Pod, error) {
	n := l.Node(name)
	if n == nil {
		return nil, fmt.Errorf("power off: no node %s", name)
	}
	out, err := ip(ctx, "-n", n.NS, "-o", "link", "show", "dev", "eth0")
	if err != nil {
		return nil, fmt.Errorf("power off %s: %w", name, err)
	}
	f := strings.Fields(out)
	i := slices.Index(f, "link/ether")
	if i < 0 || i+1 >= len(f) {
		return nil, fmt.Errorf("power off %s: no MAC address in %q", name, out)
	}
	n.mac = f[i+1]
	if err := n.CutLink(ctx); err != nil {
		return nil, fmt.Errorf("power off %s: %w", name, err)
	}
	n.killAgent()
	var gone []*Pod
	for _, p := range l.Pods() {
		if p.Node != n {
			continue
		}
		p.closeServers()
		if err := delNetns(ctx, p.NS); err != nil {
			return nil, fmt.Errorf("power off %s: pod %s: %w", name, p.Key(), err)
		}
		l.mu.Lock()
		delete(l.pods, p.Key())
		l.mu.Unlock()
		gone = append(gone, p)
	}
	// The cable goes with the machine: the kernel dismantles a deleted namespace later, and
	// the switch port must be free for the node to plug in again at PowerOn.
	if _, err := ip(ctx, "-n", l.NetnsName("sw"), "link", "del", n.Port); err != nil {
		return nil, fmt.Errorf("power off %s: %w", name, err)
	}
	n.teardown(ctx)
	if err := os.RemoveAll(n.RunDir); err != nil {
		return nil, fmt.Errorf("power off %s: %w", name, err)
	}
	n.off = true
	n.cycles++
	return gone, nil
}

// PowerOn boots a node PowerOff cut: the same name, address and switch port, a new namespace,
// tabby-node started (it finds its Node object as it left it). It returns when the agent is
// ready.
func (l *Lab) PowerOn(ctx context.Context, name string) error {
	n := l.Node(name)
	if n == nil || !n.off {
		return fmt.Errorf("power on: no node %s that is off", name)
	}
	n.off = false
	_, err := l.addNode(ctx, n)
	return err
}

// RestartPod is the kubelet running a pod again after its node booted: the same Pod object, a
// new sandbox (container ID, network namespace) wired by CNI ADD, its status written with the
// new addresses.
func (l *Lab) RestartPod(ctx context.Context, old *Pod) (*Pod, error) {
	obj, err := l.Kube.CoreV1().Pods(old.Namespace).Get(ctx, old.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("restart pod %s: %w", old.Key(), err)
	}
	id, err := containerID()
	if err != nil {
		return nil, err
	}
	p := &Pod{Name: old.Name, Namespace: old.Namespace, Node: old.Node, NS: old.NS, ContainerID: id, UID: string(obj.UID),
		Ports: old.Ports, labels: old.Labels(), serve: old.serve, obj: obj}
	start := time.Now()
	if err := l.CNIAdd(ctx, p); err != nil {
		return nil, err
	}
	if err := l.ReportPod(ctx, p); err != nil {
		return nil, err
	}
	l.log.Debug("pod restarted", "pod", p.Key(), "node", p.Node.Name, "ip", p.IP, "took", time.Since(start).Round(time.Millisecond))
	return p, nil
}
