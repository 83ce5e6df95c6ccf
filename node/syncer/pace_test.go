package syncer

import (
	"testing"
	"time"
)

func TestPacer(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	p := newPacer()

	// Cheap passes (a small cluster): events close together never wait.
	for i := range 100 {
		if w := p.wait(at(i)); w != 0 {
			t.Fatalf("event at %d ms, 1 ms after a 0.2 ms pass, waited %v", i, w)
		}
		p.spent(at(i), 200*time.Microsecond)
	}

	// Costly ones (a large cluster under churn): the burst goes, then they are spaced so that
	// they use a fifth of the time.
	p = newPacer()
	now, busy, n := at(0), time.Duration(0), 0
	for now.Before(at(10_000)) {
		now = now.Add(p.wait(now))
		p.spent(now, 4*time.Millisecond)
		busy += 4 * time.Millisecond
		n++
		now = now.Add(time.Millisecond) // the next event comes 1 ms later
	}
	if share := float64(busy) / float64(now.Sub(at(0))); share > passDuty*1.05 || share < passDuty*0.8 {
		t.Errorf("4 ms passes back to back used %.2f of the time, want about %.2f (%d passes)", share, passDuty, n)
	}

	// One very long pass (the first, in a large cluster) makes the next event wait at most burst/duty.
	p = newPacer()
	p.spent(at(0), 2*time.Second)
	if w, limit := p.wait(at(0)), time.Duration(float64(passBurst)/passDuty); w > limit || w == 0 {
		t.Errorf("after a 2 s pass the next waits %v, want (0, %v]", w, limit)
	}
}
