package qemu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// bootTimeout bounds every boot in these tests; one boot takes about 10 s on 2 TCG cores.
const bootTimeout = 3 * time.Minute

func needBoot(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("boots a qemu guest; skipped with -short")
	}
}

// TestIPIPSmoke proves the harness: Debian's kernel has ipip, and a pod-to-pod ping crosses a
// router with no pod routes only because the nodes encapsulate it (the router sees protocol 4).
func TestIPIPSmoke(t *testing.T) {
	needBoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), bootTimeout)
	defer cancel()
	res, err := Run(ctx, Options{Script: "testdata/ipip-smoke.sh"})
	if err != nil {
		t.Fatalf("ipip smoke test in the guest: %v\nconsole:\n%s", err, res.Console)
	}
	t.Logf("guest ran %s; output:\n%s", res.Boot.Round(time.Millisecond), res.Output)
	for _, want := range []string{
		"IP 198.51.100.10 > 203.0.113.10: IP 10.244.1.5 > 10.244.2.5: ICMP echo request",
		"IP 203.0.113.10 > 198.51.100.10: IP 10.244.2.5 > 10.244.1.5: ICMP echo reply",
		"PASS: pod-to-pod over IPIP",
	} {
		if !strings.Contains(res.Output, want) {
			t.Errorf("guest output lacks %q", want)
		}
	}
}

// TestGuestTools: iptables (nft and legacy), ipset and conntrack work in the guest, with the
// kernel loading their modules on demand, as tabby-node will need.
func TestGuestTools(t *testing.T) {
	needBoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), bootTimeout)
	defer cancel()
	res, err := Run(ctx, Options{Script: "testdata/tools-smoke.sh"})
	if err != nil {
		t.Fatalf("tools smoke test in the guest: %v\nconsole:\n%s", err, res.Console)
	}
	if !strings.Contains(res.Output, "PASS:") {
		t.Errorf("guest output lacks PASS:\n%s", res.Output)
	}
}

// TestRunSharesDirEnvArgsAndStatus exercises what the lab relies on: a static binary from the
// shared bin/ runs on PATH, env and args arrive, files written in /mnt reach the host, and a
// non-zero exit comes back as a *ScriptError with the output.
func TestRunSharesDirEnvArgsAndStatus(t *testing.T) {
	needBoot(t)
	share := t.TempDir()
	buildStaticHello(t, filepath.Join(share, "bin", "tabby-hello"))
	if err := os.WriteFile(filepath.Join(share, "in.txt"), []byte("from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "guest.sh")
	if err := os.WriteFile(script, []byte(`set -eu
echo "pwd=$(pwd) greeting=$GREETING args=$1,$2 guest=$TABBY_GUEST"
tabby-hello
cat in.txt
echo "written in the guest" > /mnt/out.txt
exit 7
`), 0o644); err != nil {
		t.Fatal(err)
	}
	var console bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), bootTimeout)
	defer cancel()
	res, err := Run(ctx, Options{
		Script:   script,
		Args:     []string{"one", "it's two"},
		ShareDir: share,
		Env:      map[string]string{"GREETING": "hello 'world'"},
		Console:  &console,
	})
	var se *ScriptError
	if !errors.As(err, &se) || se.ExitCode != 7 || res.ExitCode != 7 {
		t.Fatalf("Run = %+v, %v; want a ScriptError with exit code 7\nconsole:\n%s", res.ExitCode, err, res.Console)
	}
	for _, want := range []string{
		"pwd=/mnt greeting=hello 'world' args=one,it's two guest=1",
		"hello from a static binary",
		"from the host",
	} {
		if !strings.Contains(res.Output, want) {
			t.Errorf("script output lacks %q:\n%s", want, res.Output)
		}
	}
	if !strings.Contains(console.String(), "hello from a static binary") {
		t.Errorf("Console writer did not receive the guest console")
	}
	out, err := os.ReadFile(filepath.Join(share, "out.txt"))
	if err != nil || string(out) != "written in the guest\n" {
		t.Errorf("out.txt on the host = %q, %v; want the line the guest wrote", out, err)
	}
}

// TestRunTimeoutKillsGuest: a hung script must not hang the caller, and the control directory
// is removed.
func TestRunTimeoutKillsGuest(t *testing.T) {
	needBoot(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	script := filepath.Join(t.TempDir(), "hang.sh")
	if err := os.WriteFile(script, []byte("echo hanging; sleep 600\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Prepare the kernel and initramfs first so the deadline below only covers the boot.
	k, err := Prepare(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := buildInitramfs(context.Background(), k, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	start := time.Now()
	_, err = Run(ctx, Options{Script: script})
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run = %v; want a deadline error", err)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("Run returned %s after the deadline; qemu was not killed promptly", took)
	}
	left, _ := os.ReadDir(tmp)
	if len(left) != 0 {
		t.Errorf("temporary files left behind in %s: %v", tmp, left)
	}
}

// TestRunForwardsHostPort: the lab's tabby-node in the guest must reach a kube-apiserver on the
// host's loopback, over several connections at once, and the guest must reach nothing else.
func TestRunForwardsHostPort(t *testing.T) {
	needBoot(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "host answered %s\n", r.URL.Path)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	_, port, _ := net.SplitHostPort(ln.Addr().String())

	script := filepath.Join(t.TempDir(), "fwd.sh")
	if err := os.WriteFile(script, []byte(`set -eu
get() { exec 3<>/dev/tcp/$TABBY_HOST_IP/6443; printf 'GET /%s HTTP/1.0\r\n\r\n' "$1" >&3; cat <&3; }
for i in 1 2 3; do get "c$i" & done
wait
get seq
# restrict=on: the host's own address on the user network is not reachable.
if timeout 3 bash -c "exec 3<>/dev/tcp/10.0.2.2/`+port+`" 2>/dev/null; then echo "REACHED 10.0.2.2"; fi
`), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), bootTimeout)
	defer cancel()
	res, err := Run(ctx, Options{Script: script, Forwards: []Forward{{GuestPort: 6443, HostAddr: ln.Addr().String()}}})
	if err != nil {
		t.Fatalf("Run: %v\nconsole:\n%s", err, res.Console)
	}
	for _, want := range []string{"host answered /c1", "host answered /c2", "host answered /c3", "host answered /seq"} {
		if !strings.Contains(res.Output, want) {
			t.Errorf("guest output lacks %q:\n%s", want, res.Output)
		}
	}
	if strings.Contains(res.Output, "REACHED") {
		t.Errorf("guest reached the host outside the forwards:\n%s", res.Output)
	}
}

func TestOptionsValidation(t *testing.T) {
	script := filepath.Join(t.TempDir(), "s.sh")
	if err := os.WriteFile(script, []byte("true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"no script", Options{}, "Script is empty"},
		{"missing script", Options{Script: "/nonexistent/s.sh"}, `Script "/nonexistent/s.sh"`},
		{"share not a dir", Options{Script: script, ShareDir: script}, "ShareDir"},
		{"bad env name", Options{Script: script, Env: map[string]string{"A-B": "x"}}, `Env name "A-B"`},
		{"bad forward port", Options{Script: script, Forwards: []Forward{{GuestPort: 0, HostAddr: "127.0.0.1:1"}}}, "GuestPort 0"},
		{"bad forward addr", Options{Script: script, Forwards: []Forward{{GuestPort: 1, HostAddr: "nohost"}}}, `HostAddr "nohost"`},
		{"tiny memory", Options{Script: script, MemoryMB: 16}, "MemoryMB 16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Run(context.Background(), tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run = %v; want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestNewcArchive checks the cpio writer against GNU cpio's reading of it.
func TestNewcArchive(t *testing.T) {
	if _, err := exec.LookPath("cpio"); err != nil {
		t.Skip("cpio not installed")
	}
	host := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(host, []byte("abcde"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := newArchive()
	for _, e := range []*entry{
		{name: "usr/bin/tool", mode: modeRegular | 0o755, hostPath: host, size: 5},
		{name: "bin", mode: modeSymlink | 0o777, link: "usr/bin", size: 7},
		{name: "init", mode: modeRegular | 0o755, data: []byte("#!/bin/sh\n"), size: 10},
		{name: "dev/console", mode: modeCharDev | 0o600, rdevMaj: 5, rdevMin: 1},
	} {
		if err := a.add(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.add(&entry{name: "usr/bin/tool/x", mode: modeRegular, data: nil}); err == nil {
		t.Fatal("adding a file under a regular file succeeded")
	}
	var buf bytes.Buffer
	if err := a.writeNewc(&buf, func(p string) (io.ReadCloser, error) { return os.Open(p) }); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command("cpio", "-idm", "--quiet", "--no-absolute-filenames")
	cmd.Dir = dir
	cmd.Stdin = &buf
	if out, err := cmd.CombinedOutput(); err != nil && !strings.Contains(string(out), "console") {
		// Creating dev/console needs mknod; everything else must unpack.
		t.Fatalf("cpio: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "bin", "tool")); err != nil || string(b) != "abcde" {
		t.Errorf("bin/tool through the symlink = %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "init")); err != nil || string(b) != "#!/bin/sh\n" {
		t.Errorf("init = %q, %v", b, err)
	}
	if os.Geteuid() != 0 {
		return // only root can create the device node
	}
	if fi, err := os.Stat(filepath.Join(dir, "dev", "console")); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		t.Errorf("dev/console = %v, %v; want a character device", fi, err)
	}
}

// buildStaticHello builds a static Go binary the way tabby's own are built for the guest.
func buildStaticHello(t *testing.T, out string) {
	t.Helper()
	src := t.TempDir()
	files := map[string]string{
		"go.mod":  "module hello\n\ngo 1.26\n",
		"main.go": "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hello from a static binary\") }\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(src, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build static hello: %v\n%s", err, b)
	}
}
