// Package lease elects one holder of a job among the agents of a cluster with a
// coordination.k8s.io/v1 Lease, over tabby's typed client (client-go's leaderelection needs its
// clientset, which tabby-node does not link). Every write carries the resourceVersion it read, so
// two candidates never both win one term; a holder that cannot renew within its lease duration
// stops leading before another may take over, and one that stops hands the Lease back.
package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/apis/client"
)

// Config is one candidate.
type Config struct {
	Client    *client.Client
	Namespace string
	Name      string
	// Identity names this candidate in the Lease (the node's name).
	Identity string
	// Duration is how long a Lease not renewed stays its holder's (default 15s); RenewEvery how
	// often the holder renews it (default 5s). A candidate that does not hold it looks again
	// every RetryEvery (default Duration, give or take a fifth): every node of a cluster is a
	// candidate, and each look is a read the API server serves.
	Duration, RenewEvery, RetryEvery time.Duration
	Logger                           *slog.Logger
	// OnLeading is told whenever this candidate starts (true) or stops (false) leading.
	OnLeading func(bool)
}

// Run campaigns until ctx ends: while this candidate holds the Lease, lead runs with a context
// that ends when it stops holding it (lost, not renewed in time, or ctx ended). lead runs again
// at every new term.
func Run(ctx context.Context, cfg Config, lead func(context.Context)) error {
	if cfg.Duration == 0 {
		cfg.Duration = 15 * time.Second
	}
	if cfg.RenewEvery == 0 {
		cfg.RenewEvery = 5 * time.Second
	}
	if cfg.RetryEvery == 0 {
		cfg.RetryEvery = cfg.Duration
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c := &candidate{cfg: cfg, leases: cfg.Client.Leases(cfg.Namespace)}
	for {
		if err := c.waitForLease(ctx); err != nil {
			return nil
		}
		c.lead(ctx, lead)
		if ctx.Err() != nil {
			return nil
		}
	}
}

type candidate struct {
	cfg    Config
	leases client.Resource[*coordinationv1.Lease, *coordinationv1.LeaseList]
	// The record last seen and when, by this candidate's clock: a Lease expires when it has not
	// changed for its duration as this candidate sees it, whatever the holder's clock says.
	seenVersion string
	seenAt      time.Time
	// renewed is when this candidate last wrote the Lease as its holder.
	renewed time.Time
}

// waitForLease tries to take the Lease every RenewEvery until it does (nil) or ctx ends.
func (c *candidate) waitForLease(ctx context.Context) error {
	for {
		ok, err := c.tryAcquireOrRenew(ctx)
		if err != nil && ctx.Err() == nil {
			c.cfg.Logger.Warn("lease: cannot read or write the Lease", "lease", c.cfg.Namespace+"/"+c.cfg.Name, "error", err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(jitter(c.cfg.RetryEvery)):
		}
	}
}

// lead runs lead while the Lease is renewed in time, then hands it back if ctx ended.
func (c *candidate) lead(ctx context.Context, lead func(context.Context)) {
	log := c.cfg.Logger.With("lease", c.cfg.Namespace+"/"+c.cfg.Name, "identity", c.cfg.Identity)
	log.Info("lease: leading")
	if c.cfg.OnLeading != nil {
		c.cfg.OnLeading(true)
	}
	leadCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		lead(leadCtx)
	}()
	// Stop leading a margin before the Lease could expire in another candidate's eyes: it may
	// take over only after a whole Duration without a change.
	deadline := c.cfg.Duration - c.cfg.RenewEvery/2
	expire := time.NewTimer(time.Until(c.renewed.Add(deadline)))
	tick := time.NewTicker(c.cfg.RenewEvery)
	for leading := true; leading; {
		select {
		case <-ctx.Done():
			leading = false
		case <-done:
			leading = false
		case <-expire.C:
			log.Warn("lease: not renewed in time; stepping down")
			leading = false
		case <-tick.C:
			// A renewal that hangs must not outlive the term it renews.
			rctx, cancel := context.WithDeadline(ctx, c.renewed.Add(deadline))
			ok, err := c.tryAcquireOrRenew(rctx)
			cancel()
			switch {
			case ok:
				expire.Reset(time.Until(c.renewed.Add(deadline)))
			case err == nil:
				log.Warn("lease: another candidate holds the Lease; stepping down")
				leading = false
			default:
				log.Warn("lease: renewal failed; retrying", "error", err)
			}
		}
	}
	expire.Stop()
	tick.Stop()
	stop()
	<-done
	if c.cfg.OnLeading != nil {
		c.cfg.OnLeading(false)
	}
	if ctx.Err() != nil {
		c.release()
	}
	log.Info("lease: stopped leading")
}

// tryAcquireOrRenew takes or renews the Lease: true when this candidate holds it after the call.
// An error is a failed read or write, not another holder.
func (c *candidate) tryAcquireOrRenew(ctx context.Context) (bool, error) {
	now := time.Now()
	l, err := c.leases.Get(ctx, c.cfg.Name)
	if apierrors.IsNotFound(err) {
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: c.cfg.Name, Namespace: c.cfg.Namespace}}
		c.hold(l, now, true)
		created, err := c.leases.Create(ctx, l)
		if apierrors.IsAlreadyExists(err) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("create Lease %s/%s: %w", c.cfg.Namespace, c.cfg.Name, err)
		}
		c.seen(created, now)
		c.renewed = now
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("get Lease %s/%s: %w", c.cfg.Namespace, c.cfg.Name, err)
	}
	if l.ResourceVersion != c.seenVersion {
		c.seen(l, now)
	}
	holder := ""
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	mine := holder == c.cfg.Identity
	if !mine && holder != "" && now.Sub(c.seenAt) < leaseDuration(l, c.cfg.Duration) {
		return false, nil
	}
	c.hold(l, now, !mine)
	updated, err := c.leases.Update(ctx, l)
	if apierrors.IsConflict(err) {
		// Someone else wrote it since: read again next time.
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("update Lease %s/%s: %w", c.cfg.Namespace, c.cfg.Name, err)
	}
	c.seen(updated, now)
	c.renewed = now
	return true, nil
}

func (c *candidate) seen(l *coordinationv1.Lease, at time.Time) {
	c.seenVersion, c.seenAt = l.ResourceVersion, at
}

// hold writes this candidate into l as holder; acquire starts a new term.
func (c *candidate) hold(l *coordinationv1.Lease, now time.Time, acquire bool) {
	t := metav1.NewMicroTime(now)
	secs := int32(c.cfg.Duration / time.Second)
	took := l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" && *l.Spec.HolderIdentity != c.cfg.Identity
	l.Spec.HolderIdentity = &c.cfg.Identity
	l.Spec.LeaseDurationSeconds = &secs
	l.Spec.RenewTime = &t
	if acquire {
		l.Spec.AcquireTime = &t
		n := int32(0)
		switch {
		case l.Spec.LeaseTransitions != nil:
			n = *l.Spec.LeaseTransitions + 1
		case took:
			n = 1
		}
		l.Spec.LeaseTransitions = &n
	}
}

// release hands the Lease back (no holder) if this candidate still holds it, so that another
// takes over at its next look rather than after the lease duration.
func (c *candidate) release() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := c.leases.Get(ctx, c.cfg.Name)
	if err != nil {
		c.cfg.Logger.Warn("lease: cannot hand the Lease back; another candidate takes it when it expires", "error", err)
		return
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != c.cfg.Identity {
		return
	}
	l.Spec.HolderIdentity = nil
	l.Spec.AcquireTime, l.Spec.RenewTime = nil, nil
	if _, err := c.leases.Update(ctx, l); err != nil && !errors.Is(err, context.Canceled) {
		c.cfg.Logger.Warn("lease: cannot hand the Lease back; another candidate takes it when it expires", "error", err)
	}
}

func leaseDuration(l *coordinationv1.Lease, def time.Duration) time.Duration {
	if l.Spec.LeaseDurationSeconds != nil && *l.Spec.LeaseDurationSeconds > 0 {
		return time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	return def
}

// jitter spreads the candidates' looks over time: d, give or take a fifth.
func jitter(d time.Duration) time.Duration {
	return d - d/5 + rand.N(2*d/5+1)
}
