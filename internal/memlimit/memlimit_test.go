package memlimit

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestFromCgroup(t *testing.T) {
	const (
		v2Own  = "0::/\n"
		v2Host = "0::/kubepods/burstable/pod1/c1\n"
		v1     = "12:pids:/kubepods/pod1/c1\n4:cpu,cpuacct:/kubepods/pod1/c1\n3:memory:/kubepods/pod1/c1\n0::/\n"
	)
	for _, c := range []struct {
		name    string
		self    string
		files   map[string]string
		want    int64
		wantErr string
	}{
		{"v2, own namespace", v2Own, map[string]string{"memory.max": "268435456\n"}, 268435456, ""},
		{"v2, host's namespace", v2Host, map[string]string{"kubepods/burstable/pod1/c1/memory.max": "268435456\n", "memory.max": "1\n"}, 268435456, ""},
		{"v2, no limit", v2Own, map[string]string{"memory.max": "max\n"}, 0, ""},
		{"v1", v1, map[string]string{"memory/kubepods/pod1/c1/memory.limit_in_bytes": "536870912\n", "memory.max": "1\n"}, 536870912, ""},
		{"v1, no limit", v1, map[string]string{"memory/kubepods/pod1/c1/memory.limit_in_bytes": "9223372036854771712\n"}, 0, ""},
		{"no limit file", v2Host, nil, 0, ""},
		{"v1, the container's cgroup mounted as the root", v1, map[string]string{"memory/memory.limit_in_bytes": "536870912\n"}, 536870912, ""},
		{"v2, the container's cgroup mounted as the root", v2Host, map[string]string{"memory.max": "268435456\n"}, 268435456, ""},
		{"no cgroup", "", nil, 0, ""},
		{"garbage", v2Own, map[string]string{"memory.max": "lots\n"}, 0, `memory.max: "lots" is not a number of bytes`},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			for f, v := range c.files {
				p := filepath.Join(root, f)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, _, err := FromCgroup(root, []byte(c.self))
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("FromCgroup = %d, %v; want %d", got, err, c.want)
			}
		})
	}
}

// The operator's GOMEMLIMIT stands.
func TestApplyLeavesGOMEMLIMIT(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	t.Setenv("GOMEMLIMIT", "500MiB")
	if lim, _, err := Apply(); err != nil || lim != 0 || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Fatalf("with GOMEMLIMIT set: Apply = %d, %v; runtime limit %d", lim, err, debug.SetMemoryLimit(-1))
	}
}
