// Package testwait is how tabby's tests wait for something to happen: poll a condition with a
// deadline, never sleep and hope.
package testwait

import (
	"testing"
	"time"
)

// Until polls cond every 5 ms until it holds; past timeout the test fails, naming what it
// waited for.
func Until(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
