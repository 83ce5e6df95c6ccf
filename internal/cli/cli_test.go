package cli

import (
	"context"
	"strings"
	"testing"
)

func TestLogger(t *testing.T) {
	for _, level := range []string{"debug", "info", "warn", "error", "INFO"} {
		l, err := Logger(level)
		if err != nil || l == nil {
			t.Errorf("%q: %v", level, err)
		}
	}
	l, err := Logger("verbose")
	if err == nil || !strings.Contains(err.Error(), `--log-level="verbose"`) {
		t.Errorf("verbose: %v, want an error naming the flag and the value", err)
	}
	if l != nil {
		t.Error("a logger for a bad level")
	}
	if warn, _ := Logger("warn"); warn.Enabled(context.Background(), -4) {
		t.Error("warn logs debug")
	}
}
