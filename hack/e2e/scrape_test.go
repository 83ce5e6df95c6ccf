package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tabbynet/tabby/hack/lab"
)

// TestScrapesLeaveNoConnection: the lab's scrapes of an agent's metrics close their connection,
// so a soak that scrapes every minute for days does not count its own connections as the
// agent's leak.
func TestScrapesLeaveNoConnection(t *testing.T) {
	l := startLab(t, lab.Options{})
	ctx := testCtx(t, 3*time.Minute)
	n := addNodes(t, ctx, l, nodeSpecs(1)...)[0]
	for range 5 {
		if _, err := n.Metrics(ctx); err != nil {
			t.Fatal(err)
		}
	}
	port := strings.TrimPrefix(lab.MetricsAddr, "127.0.0.1:")
	err := lab.Eventually(ctx, 20*time.Second, func(ctx context.Context) error {
		out, err := n.Exec(ctx, "ss", "-Htn", "state", "established", "( sport = :"+port+" )")
		if err != nil {
			return err
		}
		if s := strings.TrimSpace(out); s != "" {
			return fmt.Errorf("connections to the agent's metrics port still open after the scrapes:\n%s", s)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
