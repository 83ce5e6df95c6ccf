package nlretry

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
)

func TestDumpRetriesInterruptedDumps(t *testing.T) {
	calls := 0
	got, err := Dump(func() ([]int, error) {
		calls++
		if calls < 4 {
			return []int{calls}, fmt.Errorf("list links: %w", netlink.ErrDumpInterrupted) // partial
		}
		return []int{1, 2, 3}, nil
	})
	if err != nil || calls != 4 || len(got) != 3 {
		t.Fatalf("Dump = %v, %v after %d calls; want the complete answer after 4", got, err, calls)
	}
}

func TestDumpNeverReturnsPartialResults(t *testing.T) {
	calls := 0
	got, err := Dump(func() ([]int, error) {
		calls++
		return []int{calls}, netlink.ErrDumpInterrupted
	})
	if err == nil || got != nil || calls != Attempts {
		t.Fatalf("Dump = %v, %v after %d calls; want nil and an error after %d", got, err, calls, Attempts)
	}
	if !Interrupted(err) || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("error %q does not say the dump was interrupted", err)
	}
}

func TestDumpPassesOtherErrorsAtOnce(t *testing.T) {
	calls := 0
	boom := errors.New("permission denied")
	if _, err := Dump(func() (int, error) { calls++; return 0, boom }); !errors.Is(err, boom) || calls != 1 {
		t.Fatalf("err %v after %d calls; want %v after 1", err, calls, boom)
	}
}
