package syncer

import "time"

// Snapshots may use snapshotDuty of a core, with a credit of snapshotBurst: in a small cluster,
// where a snapshot takes a fraction of a millisecond, every event is handled at once; under a
// stream of events in a large one (4 ms a snapshot at 1,000 nodes) they are spaced about 20 ms
// apart, each covering the events of its interval.
const (
	snapshotDuty  = 0.2
	snapshotBurst = 20 * time.Millisecond
)

// pacer keeps the snapshots' share of a core under duty: each snapshot spends its time from a
// credit that refills at duty of the wall clock, up to burst; a debt is never deeper than burst,
// so no event waits more than burst/duty (100 ms), however long a snapshot took. A fixed 20 ms
// spacing instead delayed an event that came soon after another's snapshot even when snapshots
// cost nothing: in a 5-node mesh, blocks deleted one after the other were withdrawn from the
// other kernels 9 ms after their Delete; paced by cost, 3–5 ms.
type pacer struct {
	duty   float64
	burst  time.Duration
	credit time.Duration
	at     time.Time // of the last refill; zero: never refilled (full credit)
}

func newPacer() *pacer {
	return &pacer{duty: snapshotDuty, burst: snapshotBurst, credit: snapshotBurst}
}

func (p *pacer) refill(now time.Time) {
	if !p.at.IsZero() && now.After(p.at) {
		p.credit = min(p.burst, p.credit+time.Duration(float64(now.Sub(p.at))*p.duty))
	}
	p.at = now
}

// wait is how long the next snapshot should wait: zero while there is credit.
func (p *pacer) wait(now time.Time) time.Duration {
	p.refill(now)
	if p.credit >= 0 {
		return 0
	}
	return time.Duration(float64(-p.credit) / p.duty)
}

// spent charges a snapshot that took took, ending at now.
func (p *pacer) spent(now time.Time, took time.Duration) {
	p.refill(now)
	p.credit = max(p.credit-took, -p.burst)
}
