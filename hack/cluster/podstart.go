package cluster

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/hack/lab"
)

// referenceConflist is the reference plugins' network: ptp with host-local, on a range of the
// pod CIDR that tabby's blocks of a small cluster never reach. Named 00-… so containerd, which
// takes the first configuration file by name, prefers it to tabby's 10-tabby.conflist.
const referenceConflist = `{
  "cniVersion": "1.0.0",
  "name": "reference",
  "plugins": [
    {"type": "ptp", "ipMasq": true, "mtu": 1500,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.240.0/21"}]], "routes": [{"dst": "0.0.0.0/0"}],
              "dataDir": "/run/tabby/reference-ipam"}}
  ]
}
`

// referenceRange is the host-local range of referenceConflist.
var referenceRange = netip.MustParsePrefix("10.244.240.0/21")

// PodStart is one pod start measurement: count pods created at once on one node until all are
// Running with an address.
type PodStart struct {
	CNI   string
	Pods  int
	Total time.Duration
}

// MeasurePodStart creates count pause pods on node (as `kubectl create` of count objects
// would), times them until every one is Running with an address, then deletes them and waits
// until they are gone. With reference set, the node's pods are wired by ptp + host-local
// instead of tabby for the run.
func (c *Cluster) MeasurePodStart(ctx context.Context, node *Node, count int, reference bool) (PodStart, error) {
	res := PodStart{CNI: "tabby", Pods: count}
	ns := fmt.Sprintf("podstart-tabby-%d", time.Now().UnixNano()%100000)
	if reference {
		res.CNI = "ptp + host-local"
		ns = fmt.Sprintf("podstart-ref-%d", time.Now().UnixNano()%100000)
		conf := filepath.Join(node.Root, "etc-cni", "net.d", "00-reference.conflist")
		if err := os.WriteFile(conf, []byte(referenceConflist), 0o644); err != nil {
			return res, err
		}
		// containerd reloads the directory when it changes; the addresses the pods get (checked
		// below) say which plugin wired them.
		defer os.Remove(conf)
	}
	wired := lab.PodCIDR
	if reference {
		wired = referenceRange
	}
	kube := c.Lab.Kube
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return res, err
	}
	defer func() {
		_ = kube.CoreV1().Namespaces().Delete(context.WithoutCancel(ctx), ns, metav1.DeleteOptions{})
	}()
	if err := lab.Eventually(ctx, time.Minute, func(context.Context) error {
		_, err := kube.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err
	}); err != nil {
		return res, fmt.Errorf("service account of %s: %w", ns, err)
	}
	start := time.Now()
	errs := make(chan error, count)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 10)
	for i := range count {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%03d", i)},
				Spec: corev1.PodSpec{
					NodeName:                      node.Name,
					TerminationGracePeriodSeconds: new(int64),
					Containers:                    []corev1.Container{{Name: "pause", Image: PauseImage, ImagePullPolicy: corev1.PullNever}},
				},
			}
			if _, err := kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return res, fmt.Errorf("create pods: %w", err)
	}
	if err := lab.Eventually(ctx, 5*time.Minute, func(context.Context) error {
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
				continue
			}
			ip, err := netip.ParseAddr(p.Status.PodIP)
			if err != nil || !wired.Contains(ip) || (!reference && referenceRange.Contains(ip)) {
				return lab.Stop(fmt.Errorf("pod %s got %s: not wired by %s", p.Name, p.Status.PodIP, res.CNI))
			}
			running++
		}
		if running < count {
			return fmt.Errorf("%d of %d pods running with an address", running, count)
		}
		return nil
	}); err != nil {
		return res, err
	}
	res.Total = time.Since(start)
	if err := kube.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{}); err != nil {
		return res, err
	}
	err := lab.Eventually(ctx, 5*time.Minute, func(context.Context) error {
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("%d pods left", len(pods.Items))
		}
		return nil
	})
	return res, err
}
