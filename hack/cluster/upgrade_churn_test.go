package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/hack/lab"
)

// churn creates and deletes pods on every node, one after another per node, while a roll
// replaces the agents: CNI ADDs and DELs meet a tabby-node that is stopping, absent or starting.
type churn struct {
	c      *Cluster
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	started int
	ready   []time.Duration
	errs    []error
}

// podReadyLimit is how long a churned pod may take to be Ready: kubelet retries a failed
// sandbox, so an agent restart may slow a pod but must not strand it.
const podReadyLimit = 3 * time.Minute

func startChurn(ctx context.Context, c *Cluster) *churn {
	ctx, cancel := context.WithCancel(ctx)
	ch := &churn{c: c, cancel: cancel}
	for _, n := range c.Nodes {
		ch.wg.Add(1)
		go func() { defer ch.wg.Done(); ch.run(ctx, n.Name) }()
	}
	return ch
}

func (ch *churn) run(ctx context.Context, node string) {
	kube := ch.c.Lab.Kube.CoreV1().Pods(upgradeNS)
	for i := 0; ctx.Err() == nil; i++ {
		name := fmt.Sprintf("churn-%s-%d", node, i)
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"role": "churn"}},
			Spec: corev1.PodSpec{
				NodeName:                      node,
				TerminationGracePeriodSeconds: new(int64),
				Containers: []corev1.Container{{
					Name: "pause", Image: AgnhostImage, ImagePullPolicy: corev1.PullNever, Args: []string{"pause"},
				}},
			},
		}
		// Each pod's own steps run to their end even after the churn is stopped, so that no
		// pod is left behind half made.
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), podReadyLimit+time.Minute)
		err := ch.cycle(pctx, kube, p)
		cancel()
		ch.mu.Lock()
		ch.started++
		if err != nil {
			ch.errs = append(ch.errs, fmt.Errorf("%s: %w", name, err))
		}
		ch.mu.Unlock()
	}
}

// cycle creates the pod, waits until it is Ready, deletes it and waits until it is gone.
func (ch *churn) cycle(ctx context.Context, kube interface {
	Create(context.Context, *corev1.Pod, metav1.CreateOptions) (*corev1.Pod, error)
	Get(context.Context, string, metav1.GetOptions) (*corev1.Pod, error)
	Delete(context.Context, string, metav1.DeleteOptions) error
}, p *corev1.Pod) error {
	start := time.Now()
	if _, err := kube.Create(ctx, p, metav1.CreateOptions{}); err != nil {
		return err
	}
	err := lab.Eventually(ctx, podReadyLimit, func(ctx context.Context) error {
		got, err := kube.Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !podReady(got) {
			return fmt.Errorf("not ready (%s)", got.Status.Phase)
		}
		return nil
	})
	if err == nil {
		ch.mu.Lock()
		ch.ready = append(ch.ready, time.Since(start))
		ch.mu.Unlock()
	}
	if derr := kube.Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); derr != nil {
		return errors.Join(err, derr)
	}
	gone := lab.Eventually(ctx, time.Minute, func(ctx context.Context) error {
		if _, err := kube.Get(ctx, p.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("not deleted yet (%v)", err)
		}
		return nil
	})
	return errors.Join(err, gone)
}

// stop ends the churn once every pod it made is gone, and says what it saw: how many pods,
// how long the slowest took to be Ready, and the sandboxes kubelet had to retry (a CNI ADD
// that failed), whose number it also returns.
func (ch *churn) stop(ctx context.Context) (string, int, error) {
	ch.cancel()
	ch.wg.Wait()
	evs, err := ch.c.Lab.Kube.CoreV1().Events(upgradeNS).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedCreatePodSandBox"})
	if err != nil {
		return "", 0, err
	}
	var failed []string
	for _, e := range evs.Items {
		if strings.HasPrefix(e.InvolvedObject.Name, "churn-") {
			failed = append(failed, fmt.Sprintf("%s ×%d: %s", e.InvolvedObject.Name, max(e.Count, 1), e.Message))
		}
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	slowest := time.Duration(0)
	if len(ch.ready) > 0 {
		slowest = slices.Max(ch.ready)
	}
	s := fmt.Sprintf("%d pods created and deleted across the nodes, %d Ready, the slowest in %s; %d sandboxes retried",
		ch.started, len(ch.ready), slowest.Round(100*time.Millisecond), len(failed))
	if len(failed) > 0 {
		s += ":\n  " + strings.Join(failed, "\n  ")
	}
	return s, len(failed), errors.Join(ch.errs...)
}
