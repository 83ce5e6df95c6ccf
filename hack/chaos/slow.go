package chaos

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/tabbynet/tabby/hack/lab"
)

// slowEtcd holds every request kube-apiserver sends etcd for each of delays in turn and, at
// each, changes a policy and runs adds CNI ADDs at once on the server node; then it takes the
// latency away and settles the ADDs' outcomes.
func (c *Campaign) slowEtcd(ctx context.Context, delays []time.Duration, adds int) (time.Time, string, error) {
	env := c.Lab.Env
	if env == nil {
		return time.Time{}, "", errors.New("etcd latency: the lab runs no control plane of its own")
	}
	var outcomes []addOutcome
	var steps []string
	var errs []error
	for _, d := range delays {
		if err := env.SetEtcdLatency(d); err != nil {
			return time.Time{}, "", err
		}
		start := time.Now()
		if err := c.churnPolicy(ctx); err != nil {
			errs = append(errs, fmt.Errorf("etcd +%s: %w", d, err))
		}
		policy := time.Since(start)
		pods := make([]*lab.Pod, 0, adds)
		for range adds {
			p, err := c.Lab.CreatePod(ctx, lab.PodSpec{Name: c.name("slow"), Node: c.Servers.Name})
			if err != nil {
				_ = env.SetEtcdLatency(0)
				return time.Time{}, "", fmt.Errorf("etcd +%s: %w", d, err)
			}
			pods = append(pods, p)
		}
		round := make([]addOutcome, len(pods))
		var wg sync.WaitGroup
		for i, p := range pods {
			wg.Add(1)
			go func() {
				defer wg.Done()
				actx, cancel := context.WithTimeout(ctx, 2*time.Minute)
				defer cancel()
				t0 := time.Now()
				err := c.Lab.CNIAdd(actx, p)
				round[i] = addOutcome{pod: p, err: err, took: time.Since(t0), done: time.Now()}
			}()
		}
		wg.Wait()
		ok, slowest := 0, time.Duration(0)
		for _, o := range round {
			slowest = max(slowest, o.took)
			if o.err == nil {
				ok++
			} else if err := c.checkFailedAdd(ctx, o.pod); err != nil {
				errs = append(errs, err)
			}
		}
		steps = append(steps, fmt.Sprintf("+%s per request: a policy change written in %s, %d of %d ADDs succeeded, the slowest in %s",
			d, policy.Round(10*time.Millisecond), ok, len(round), slowest.Round(100*time.Millisecond)))
		outcomes = append(outcomes, round...)
	}
	healed := time.Now()
	if err := env.SetEtcdLatency(0); err != nil {
		return healed, "", err
	}
	note, err := c.finishAdds(ctx, outcomes)
	return healed, strings.Join(steps, "; ") + "; " + note, errors.Join(append(errs, err)...)
}
