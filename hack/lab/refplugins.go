package lab

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"

	"github.com/tabbynet/tabby/internal/testenv"
)

// RefPluginsVersion is the containernetworking/plugins release the lab uses for loopback and
// the stub (ptp + host-local), and the reference the benchmarks compare against.
const RefPluginsVersion = "v1.9.1"

var refPlugins = []string{"main/ptp", "main/loopback", "ipam/host-local", "meta/portmap", "meta/bandwidth"}

var refMu sync.Mutex

// ReferencePlugins builds the reference CNI plugins once into $TABBY_CACHE and returns the
// directory.
func ReferencePlugins(ctx context.Context) (string, error) {
	refMu.Lock()
	defer refMu.Unlock()
	dir := filepath.Join(filepath.Dir(testenv.BinDir()), "cni-plugins-"+RefPluginsVersion)
	missing := []string{}
	for _, p := range refPlugins {
		if _, err := os.Stat(filepath.Join(dir, filepath.Base(p))); err != nil {
			missing = append(missing, "github.com/containernetworking/plugins/plugins/"+p+"@"+RefPluginsVersion)
		}
	}
	if len(missing) == 0 {
		return dir, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "go", append([]string{"install"}, missing...)...)
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "CGO_ENABLED=0", "GOFLAGS=")
	cmd.Dir = os.TempDir() // outside any module: `go install pkg@version` builds it on its own
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build reference CNI plugins into %s: %w\n%s", dir, err, out)
	}
	return dir, nil
}
