package flowlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Opener runs fn in felix's network namespace (netnsrun.Runner): the sockets are opened there.
type Opener func(fn func() error) error

// Capture reads NFLOG and conntrack events into a Joiner, and closes the aggregator's
// intervals, while it runs. Stop ends it.
type Capture struct {
	cancel context.CancelFunc
	done   chan struct{}
	nflog  *nflogReader
	ct     *ctReader
}

// StartCapture opens both subscriptions in the namespace open runs in and feeds j, closing
// agg's interval every interval.
func StartCapture(open Opener, j *Joiner, agg *Aggregator, interval time.Duration, log *slog.Logger) (*Capture, error) {
	c := &Capture{done: make(chan struct{})}
	err := open(func() error {
		var err error
		if c.nflog, err = openNFLOG(); err != nil {
			return err
		}
		if c.ct, err = openConntrack(); err != nil {
			return errors.Join(err, c.nflog.close())
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	packets := make(chan []Packet, 256)
	readErr := make(chan error, 1)
	var readers sync.WaitGroup
	readers.Add(1)
	go func() {
		defer readers.Done()
		for {
			ps, err := c.nflog.read()
			if err != nil {
				if ctx.Err() == nil {
					select {
					case readErr <- fmt.Errorf("nflog: read: %w", err):
					default:
					}
				}
				return
			}
			select {
			case packets <- ps:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() {
		defer close(c.done)
		c.loop(ctx, packets, readErr, j, agg, interval, log)
		cancel()
		_ = c.nflog.close()
		_ = c.ct.close()
		readers.Wait()
	}()
	return c, nil
}

func (c *Capture) loop(ctx context.Context, packets <-chan []Packet, readErr <-chan error, j *Joiner, agg *Aggregator, interval time.Duration, log *slog.Logger) {
	resolve := time.NewTicker(joinGrace / 2)
	defer resolve.Stop()
	flush := time.NewTicker(interval)
	defer flush.Stop()
	for {
		select {
		case <-ctx.Done():
			now := time.Now()
			j.Resolve(now.Add(joinGrace))
			agg.Close(now)
			j.Reset()
			return
		case ps := <-packets:
			now := time.Now()
			for _, p := range ps {
				j.OnPacket(now, p)
			}
		case e := <-c.ct.events:
			if ce, ok := connEvent(e); ok {
				j.OnConn(time.Now(), ce)
			}
		case err := <-c.ct.errs:
			log.Warn("flow log: conntrack reader stopped", "error", err)
			return
		case err := <-readErr:
			log.Warn("flow log: NFLOG reader stopped", "error", err)
			return
		case now := <-resolve.C:
			j.Resolve(now)
		case now := <-flush.C:
			j.Resolve(now)
			agg.Close(now)
		}
	}
}

// Stop ends the capture and waits for its sockets to close; the open interval is closed.
func (c *Capture) Stop() {
	c.cancel()
	<-c.done
}

// Done is closed when the capture has ended: stopped, or a reader failed (then it is started
// again).
func (c *Capture) Done() <-chan struct{} { return c.done }
