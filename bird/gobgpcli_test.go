package bird

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tabbynet/tabby/apis/model"
	"github.com/tabbynet/tabby/bird/internal/netnstest"
)

// gobgpCLIVersion is the stock CLI the README tells operators to install: the same major
// version as the embedded GoBGP. `make tools` builds it into $TABBY_CACHE/bin.
const gobgpCLIVersion = "v4.8.0"

func gobgpCLI(t *testing.T) string {
	t.Helper()
	cache := os.Getenv("TABBY_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "tabby")
	}
	bin := filepath.Join(cache, "bin", "gobgp-"+gobgpCLIVersion)
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("stock gobgp CLI %s missing at %s: `make tools` builds it", gobgpCLIVersion, bin)
		}
		t.Skipf("stock gobgp CLI %s not built (make tools): %v", gobgpCLIVersion, err)
	}
	return bin
}

// TestStockGoBGPCLI: an operator's `gobgp` of the same major version reads a node's RIB and
// sessions through the GoBGP API tabby-node serves on loopback.
func TestStockGoBGPCLI(t *testing.T) {
	netnstest.Require(t)
	cli := gobgpCLI(t)
	all := []model.Node{mkNode(81, nil, ""), mkNode(82, nil, "")}
	a := startNode(t, all[0], all, nil, func(c *Config) { c.GoBGPAPI = "127.0.0.1:50181" })
	b := startNode(t, all[1], all, nil)
	a.routes.waitRoute(t, b.block, addr4(b.Node), 15*time.Second)

	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(cli, append([]string{"-u", "127.0.0.1", "-p", "50181"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("gobgp %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	var rib string
	deadline := time.Now().Add(10 * time.Second)
	for {
		rib = run("global", "rib")
		if strings.Contains(rib, b.block.String()) && strings.Contains(rib, a.block.String()) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("gobgp global rib lacks %s and %s:\n%s", a.block, b.block, rib)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if nb := run("neighbor"); !strings.Contains(nb, addr4(b.Node).String()) || !strings.Contains(strings.ToLower(nb), "establ") {
		t.Fatalf("gobgp neighbor does not show the established session with %s:\n%s", addr4(b.Node), nb)
	}
}
