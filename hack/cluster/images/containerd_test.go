package images

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tabbynet/tabby/hack/cluster/image"
)

// cacheBin is $TABBY_CACHE/bin (default ~/.cache/tabby/bin), where the cluster's containerd,
// ctr, runc shim and agnhost are built.
func cacheBin() string {
	if d := os.Getenv("TABBY_CACHE"); d != "" {
		return filepath.Join(d, "bin")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "tabby", "bin")
}

// The three archives imported by a real containerd, and a container of each run from them
// (testdata/containerd-check.sh). Skipped unless containerd, ctr, the shim, runc, agnhost and
// tabby's binaries (TABBY_BIN, as make test sets it) are all there.
func TestContainerdImport(t *testing.T) {
	needRoot(t)
	bin := cacheBin()
	for _, b := range []string{"containerd", "ctr", "containerd-shim-runc-v2", "agnhost"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			t.Skipf("%s not built: %v", b, err)
		}
	}
	for _, b := range []string{"runc", "unshare"} {
		if _, err := exec.LookPath(b); err != nil {
			t.Skipf("no %s", b)
		}
	}
	tabbyBin := os.Getenv("TABBY_BIN")
	if tabbyBin == "" {
		t.Skip("TABBY_BIN (make build's bin/) not set")
	}
	archives := t.TempDir()
	pauseBin, err := BuildPause(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tabby, err := Tabby(tabbyBin, "containerd-check")
	if err != nil {
		t.Fatal(err)
	}
	agnhost, missing, err := Agnhost(filepath.Join(bin, "agnhost"))
	if err != nil || len(missing) > 0 {
		t.Skipf("agnhost image: %v, missing tools %v", err, missing)
	}
	for name, img := range map[string]image.Image{"pause": Pause(pauseBin), "tabby": tabby, "agnhost": agnhost} {
		f, err := os.Create(filepath.Join(archives, name+".tar"))
		if err != nil {
			t.Fatal(err)
		}
		if err := image.Write(f, img); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	state := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	script, err := filepath.Abs("testdata/containerd-check.sh")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "unshare", "--mount", "--propagation", "private", "bash", script, state, archives, "containerd-check")
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	t.Logf("%s", strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("containerd check: %v", err)
	}
}
