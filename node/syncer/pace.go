package syncer

import "time"

// Passes may use passDuty of a core, with a credit of passBurst: in a small cluster, where a pass
// costs next to nothing, every event is handled at once; under a stream of events in a large one,
// where a pass costs more, they are spaced, each covering the events of its interval.
const (
	passDuty  = 0.2
	passBurst = 20 * time.Millisecond
)

// pacer keeps the passes' share of a core under duty: each pass spends its time from a credit
// that refills at duty of the wall clock, up to burst; a debt is never deeper than burst, so no
// event waits more than burst/duty, however long a pass took. Pacing by cost rather than by a
// fixed spacing: a fixed spacing delays an event that comes soon after another's pass even when
// passes cost nothing (blocks deleted one after the other would be withdrawn from the other
// kernels later than they need be).
type pacer struct {
	duty   float64
	burst  time.Duration
	credit time.Duration
	at     time.Time // of the last refill; zero: never refilled (full credit)
}

func newPacer() *pacer {
	return &pacer{duty: passDuty, burst: passBurst, credit: passBurst}
}

func (p *pacer) refill(now time.Time) {
	if !p.at.IsZero() && now.After(p.at) {
		p.credit = min(p.burst, p.credit+time.Duration(float64(now.Sub(p.at))*p.duty))
	}
	p.at = now
}

// wait is how long the next pass should wait: zero while there is credit.
func (p *pacer) wait(now time.Time) time.Duration {
	p.refill(now)
	if p.credit >= 0 {
		return 0
	}
	return time.Duration(float64(-p.credit) / p.duty)
}

// spent charges a pass that took took, ending at now.
func (p *pacer) spent(now time.Time, took time.Duration) {
	p.refill(now)
	p.credit = max(p.credit-took, -p.burst)
}
