// Package nlretry repeats netlink dumps that raced with a change. The kernel marks such a dump
// (NLM_F_DUMP_INTR) and github.com/vishvananda/netlink returns ErrDumpInterrupted together with
// partial results: on a node where pods come and go, a link or route dump races with veths being
// created and deleted a few hundred times a second. A partial list must never be used as the
// whole (felix would take missing routes for gone ones), and a start must not fail for it: every
// dump in tabby goes through Do or Dump.
package nlretry

import (
	"errors"
	"fmt"
	"time"

	"github.com/vishvananda/netlink"
)

// Attempts bounds the tries of one dump. A dump of a node's links or routes takes well under a
// millisecond, so even under heavy churn a few tries get a consistent one; the bound only stops
// a pathological kernel from holding the caller forever.
const Attempts = 20

// Interrupted tells whether err is a dump interrupted by a concurrent change.
func Interrupted(err error) bool { return errors.Is(err, netlink.ErrDumpInterrupted) }

// Do runs dump until it completes without interruption. dump must start from scratch on every
// call (reset what it collects): each try's partial results are thrown away.
func Do(dump func() error) error {
	for i := 1; ; i++ {
		err := dump()
		if err == nil || !Interrupted(err) {
			return err
		}
		if i == Attempts {
			return fmt.Errorf("netlink dump interrupted by concurrent changes %d times in a row: %w", i, err)
		}
		// A short, growing pause lets a burst of changes pass (at most ~20 ms in all).
		time.Sleep(time.Duration(i) * 100 * time.Microsecond)
	}
}

// Dump is Do for a dump that returns its results: it returns only a complete answer.
func Dump[T any](dump func() (T, error)) (T, error) {
	var out T
	err := Do(func() error {
		v, err := dump()
		if err == nil {
			out = v
		}
		return err
	})
	return out, err
}
