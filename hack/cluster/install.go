package cluster

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/hack/lab"
	"github.com/tabbynet/tabby/internal/testenv"
)

// Release is the Helm release name of tabby.
const Release = "tabby"

// InstallTabby installs charts/tabby with helm, as a user would, pointed at the imported image,
// and waits until tabby-node runs on every node and every node is Ready.
func (c *Cluster) InstallTabby(ctx context.Context) error {
	start := time.Now()
	repo, err := lab.FindRepo()
	if err != nil {
		return err
	}
	if err := c.Helm(ctx, "install", filepath.Join(repo, "charts", "tabby"), c.ImageTag, "--create-namespace"); err != nil {
		return err
	}
	if err := c.waitTabbyReady(ctx, 3*time.Minute); err != nil {
		return err
	}
	c.log.Info("tabby installed by helm", "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// Helm runs `helm install` or `helm upgrade` of tabby's release from the chart in chartDir,
// pointed at the tabby image imported under tag, with the cluster's encapsulation and HelmSet
// values and any further arguments. It does not wait.
func (c *Cluster) Helm(ctx context.Context, verb, chartDir, tag string, more ...string) error {
	args := []string{verb, Release, chartDir,
		"--namespace", lab.Namespace, "--kubeconfig", c.Kubeconfig,
		// The image was imported into every node's containerd: nothing to pull.
		"--set", "image.tag=" + tag, "--set", "image.pullPolicy=Never"}
	encap, err := EncapValues(c.opts.Encap)
	if err != nil {
		return err
	}
	for _, s := range append(encap, c.opts.HelmSet...) {
		args = append(args, "--set", s)
	}
	return c.helm(ctx, append(args, more...)...)
}

// helm runs helm against the cluster.
func (c *Cluster) helm(ctx context.Context, args ...string) error {
	if out, err := exec.CommandContext(ctx, filepath.Join(testenv.BinDir(), "helm"), args...).CombinedOutput(); err != nil {
		return fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// waitNodesRegistered waits until every kubelet has registered its Node.
func (c *Cluster) waitNodesRegistered(ctx context.Context) error {
	return lab.Eventually(ctx, 2*time.Minute, func(context.Context) error {
		for _, n := range c.Nodes {
			if !n.kubelet.Running() {
				return lab.Stop(n.kubelet.ExitError())
			}
			if _, err := c.Lab.Kube.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{}); err != nil {
				return fmt.Errorf("node %s not registered: %w", n.Name, err)
			}
		}
		return nil
	})
}

// waitTabbyReady waits for a Ready tabby-node pod on every node, and every node Ready (a node
// is NotReady until the CNI configuration tabby installs is there).
func (c *Cluster) waitTabbyReady(ctx context.Context, timeout time.Duration) error {
	return lab.Eventually(ctx, timeout, c.tabbyReady)
}

// tabbyReady: a Ready tabby-node pod on every node, and every node Ready.
func (c *Cluster) tabbyReady(ctx context.Context) error {
	for _, n := range c.Nodes {
		if !n.kubelet.Running() {
			return lab.Stop(n.kubelet.ExitError())
		}
	}
	pods, err := c.Lab.Kube.CoreV1().Pods(lab.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=tabby-node"})
	if err != nil {
		return err
	}
	ready := map[string]bool{}
	for _, p := range pods.Items {
		if podReady(&p) {
			ready[p.Spec.NodeName] = true
		}
	}
	for _, n := range c.Nodes {
		if !ready[n.Name] {
			return fmt.Errorf("no ready tabby-node pod on %s (%d pods)", n.Name, len(pods.Items))
		}
		node, err := c.Lab.Kube.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !nodeReady(node) {
			return fmt.Errorf("node %s not Ready", n.Name)
		}
	}
	return nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Kubectl runs kubectl against the cluster.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, testenv.Kubectl(), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// EncapValues are the chart values of an encapsulation: "" or "none" routes natively with BGP,
// "vxlan" puts the pool in VXLAN and runs no BGP anywhere (the chart's bgp.enabled=false).
func EncapValues(encap string) ([]string, error) {
	switch encap {
	case "", "none":
		return nil, nil
	case "vxlan":
		return []string{"ipPool.vxlanMode=Always", "bgp.enabled=false"}, nil
	}
	return nil, fmt.Errorf("encapsulation %q: want \"none\" or \"vxlan\"", encap)
}
