// Package qemu boots Debian's kernel under qemu (TCG) with a busybox initramfs and runs a bash
// script in it. The build machine's kernel has no ipip driver, so anything that needs a real
// tunl0 (tabby's cross-subnet IPIP path) is tested in this guest instead.
//
// The guest is private: by default it has no network card, so its namespaces, links and routes
// never reach the host. A host directory is shared into the guest over virtio-9p at /mnt (put
// the static tabby binaries in its bin/, which is first on the guest's PATH); the script runs
// with bash in /mnt, and Run returns its exit status and output once the guest has powered off.
// Options.Forwards opens only named host TCP services to the guest (a kube-apiserver on the
// host's loopback), at GuestForwardIP.
//
// The guest has the host's bash, ip, ping, tcpdump, iptables (nft and legacy), ipset, conntrack
// and modprobe, busybox for the rest, and the modules for ipip, veth, bridge, dummy, netfilter
// and ipset (loaded on demand by the kernel).
//
//	res, err := qemu.Run(ctx, qemu.Options{
//		Script:   "testdata/cross-subnet.sh", // runs as: bash script ARGS..., in /mnt
//		ShareDir: dir,                        // dir/bin/tabby-node etc. (CGO_ENABLED=0)
//		Env:      map[string]string{"KUBECONFIG": "/mnt/kubeconfig"},
//		Forwards: []qemu.Forward{{GuestPort: 6443, HostAddr: apiserverAddr}},
//	})
//	// err is a *qemu.ScriptError if the script exited non-zero; res.Output has its output.
package qemu

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

//go:embed prepare.sh
var prepareScript []byte

// DefaultTimeout bounds a run whose context has no deadline.
const DefaultTimeout = 5 * time.Minute

// Kernel is a prepared guest kernel (see prepare.sh).
type Kernel struct {
	CacheDir string // <cache>/qemu
	Dir      string // <cache>/qemu/linux-<Version>
	Version  string // e.g. 6.1.0-56-amd64
	// Image is what qemu boots: the uncompressed vmlinux (PVH entry: no decompression, which
	// is slow under TCG) when prepare.sh could extract it, else the bzImage.
	Image string
}

// CacheDir is where the harness keeps the kernel and initramfs: $TABBY_CACHE/qemu, by default
// $HOME/.cache/tabby/qemu.
func CacheDir() string {
	base := os.Getenv("TABBY_CACHE")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		base = filepath.Join(home, ".cache", "tabby")
	}
	return filepath.Join(base, "qemu")
}

var prepareMu sync.Mutex

// Prepare makes sure qemu, busybox and Debian's kernel are present, running the embedded
// prepare.sh (which installs packages and downloads the kernel once) when the cache lacks them.
// cacheDir is the qemu cache directory; empty means CacheDir().
func Prepare(ctx context.Context, cacheDir string) (Kernel, error) {
	prepareMu.Lock()
	defer prepareMu.Unlock()
	if cacheDir == "" {
		cacheDir = CacheDir()
	}
	if filepath.Base(cacheDir) != "qemu" {
		return Kernel{}, fmt.Errorf("qemu cache directory %q: must end in /qemu (prepare.sh appends it to TABBY_CACHE)", cacheDir)
	}
	if k, err := loadKernel(cacheDir); err == nil {
		if _, err := exec.LookPath("qemu-system-x86_64"); err == nil {
			return k, nil
		}
	}
	start := time.Now()
	cmd := exec.CommandContext(ctx, "bash", "-c", string(prepareScript))
	cmd.Env = append(os.Environ(), "TABBY_CACHE="+filepath.Dir(cacheDir))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return Kernel{}, fmt.Errorf("prepare qemu guest kernel in %s: %w\n%s", cacheDir, err, out)
	}
	k, err := loadKernel(cacheDir)
	if err != nil {
		return Kernel{}, err
	}
	slog.Info("prepared qemu guest kernel", "version", k.Version, "took", time.Since(start).Round(time.Millisecond))
	return k, nil
}

func loadKernel(cacheDir string) (Kernel, error) {
	cur, err := os.ReadFile(filepath.Join(cacheDir, "current"))
	if err != nil {
		return Kernel{}, fmt.Errorf("no prepared kernel in %s: %w", cacheDir, err)
	}
	name := strings.TrimSpace(string(cur))
	k := Kernel{
		CacheDir: cacheDir,
		Dir:      filepath.Join(cacheDir, name),
		Version:  strings.TrimPrefix(name, "linux-"),
		Image:    filepath.Join(cacheDir, name, "vmlinux"),
	}
	if _, err := os.Stat(filepath.Join(k.Dir, "vmlinux.unavailable")); err == nil {
		k.Image = filepath.Join(k.Dir, "vmlinuz")
	}
	for _, p := range []string{k.Image, filepath.Join(k.Dir, "modules.boot")} {
		if _, err := os.Stat(p); err != nil {
			return Kernel{}, fmt.Errorf("prepared kernel %s is incomplete: %w", k.Dir, err)
		}
	}
	return k, nil
}

// Options describe one guest run.
type Options struct {
	// Script is the host path of the bash script to run in the guest. It is copied into a
	// private control directory, so it need not live in ShareDir.
	Script string
	// Args are passed to the script.
	Args []string
	// ShareDir, if set, is mounted read-write at /mnt in the guest (virtio-9p) and is the
	// script's working directory; /mnt/bin is first on PATH. Binaries in it must be static.
	ShareDir string
	// Env is exported to the script (names must be shell identifiers).
	Env map[string]string
	// Forwards make host TCP services (the lab's kube-apiserver) reachable from the guest's
	// root namespace at GuestForwardIP:GuestPort. Without any, the guest has no network card.
	Forwards []Forward
	// HostTools are extra host programs or directories copied into the guest at the same path,
	// with their libraries (e.g. /usr/sbin/bird), on top of DefaultHostTools.
	HostTools []string
	// MemoryMB defaults to 1024; CPUs to 1.
	MemoryMB int
	CPUs     int
	// Console, if set, receives the guest console as it arrives (e.g. a test logger).
	Console io.Writer
	// CacheDir is the qemu cache directory; empty means CacheDir().
	CacheDir string
}

// Result is what a guest run produced.
type Result struct {
	// ExitCode is the script's exit status.
	ExitCode int
	// Output is the script's stdout and stderr (interleaved as written).
	Output string
	// Console is everything the guest printed on its serial console: kernel messages, init,
	// and the script's output again.
	Console string
	// Boot is how long qemu ran, from start to power-off.
	Boot time.Duration
}

// ScriptError is returned when the guest ran the script and it exited non-zero.
type ScriptError struct {
	ExitCode int
	Output   string
}

func (e *ScriptError) Error() string {
	return fmt.Sprintf("guest script exited with status %d; output:\n%s", e.ExitCode, tail(e.Output, 8000))
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (o *Options) validate() error {
	if o.Script == "" {
		return errors.New("qemu options: Script is empty")
	}
	if fi, err := os.Stat(o.Script); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("qemu options: Script %q is not a readable file", o.Script)
	}
	if o.ShareDir != "" {
		if fi, err := os.Stat(o.ShareDir); err != nil || !fi.IsDir() {
			return fmt.Errorf("qemu options: ShareDir %q is not a directory", o.ShareDir)
		}
		if strings.Contains(o.ShareDir, ",") {
			return fmt.Errorf("qemu options: ShareDir %q contains a comma, which qemu's -virtfs cannot take", o.ShareDir)
		}
	}
	for k := range o.Env {
		if !envName.MatchString(k) {
			return fmt.Errorf("qemu options: Env name %q is not a shell identifier", k)
		}
	}
	for _, f := range o.Forwards {
		if err := f.validate(); err != nil {
			return err
		}
	}
	if o.MemoryMB < 0 || (o.MemoryMB > 0 && o.MemoryMB < 256) {
		return fmt.Errorf("qemu options: MemoryMB %d is below 256", o.MemoryMB)
	}
	if o.CPUs < 0 {
		return fmt.Errorf("qemu options: CPUs %d is negative", o.CPUs)
	}
	return nil
}

// Run boots the guest, runs the script and returns once the guest is off. The error is nil
// only if the script exited 0; a non-zero exit gives a *ScriptError (Result is filled in as
// well), a guest that never reported a status gives an error with the console's tail. The
// context's deadline (DefaultTimeout when it has none) kills qemu.
func Run(ctx context.Context, opts Options) (Result, error) {
	if err := opts.validate(); err != nil {
		return Result{}, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	k, err := Prepare(ctx, opts.CacheDir)
	if err != nil {
		return Result{}, err
	}
	initrd, err := buildInitramfs(ctx, k, opts.HostTools)
	if err != nil {
		return Result{}, fmt.Errorf("build guest initramfs: %w", err)
	}

	ctl, err := os.MkdirTemp("", "tabby-qemu-")
	if err != nil {
		return Result{}, fmt.Errorf("create guest control directory: %w", err)
	}
	defer os.RemoveAll(ctl)
	if err := writeControl(ctl, opts); err != nil {
		return Result{}, err
	}

	mem, cpus := opts.MemoryMB, opts.CPUs
	if mem == 0 {
		mem = 1024
	}
	if cpus == 0 {
		cpus = 1
	}
	args := []string{
		"-accel", "tcg", "-cpu", "max", // -enable-kvm hangs on the machines this runs on: TCG is slow but works
		"-m", strconv.Itoa(mem), "-smp", strconv.Itoa(cpus),
		"-nographic", "-no-reboot",
		"-kernel", k.Image, "-initrd", initrd,
		"-append", "console=ttyS0 quiet panic=-1",
		"-virtfs", "local,path=" + ctl + ",mount_tag=tabbyctl,security_model=none,id=tabbyctl",
	}
	if len(opts.Forwards) == 0 {
		args = append(args, "-nic", "none") // no network card: guest traffic cannot leave the guest
	} else {
		nd, err := netdevArgs(opts.Forwards)
		if err != nil {
			return Result{}, err
		}
		args = append(args, nd...)
	}
	if opts.ShareDir != "" {
		abs, err := filepath.Abs(opts.ShareDir)
		if err != nil {
			return Result{}, fmt.Errorf("qemu options: ShareDir %q: %w", opts.ShareDir, err)
		}
		args = append(args, "-virtfs", "local,path="+abs+",mount_tag=host0,security_model=none,id=host0")
	}

	var console bytes.Buffer
	var w io.Writer = &console
	if opts.Console != nil {
		w = io.MultiWriter(&console, opts.Console)
	}
	cmd := exec.CommandContext(ctx, "qemu-system-x86_64", args...)
	cmd.Stdout = w
	cmd.Stderr = w
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	runErr := cmd.Run()
	res := Result{Boot: time.Since(start), Console: strings.ReplaceAll(console.String(), "\r\n", "\n")}

	if ctx.Err() != nil {
		return res, fmt.Errorf("qemu guest killed after %s: %w; console tail:\n%s", res.Boot.Round(time.Millisecond), ctx.Err(), tail(res.Console, 4000))
	}
	if runErr != nil {
		return res, fmt.Errorf("qemu-system-x86_64: %w; console tail:\n%s", runErr, tail(res.Console, 4000))
	}
	out, _ := os.ReadFile(filepath.Join(ctl, "output"))
	res.Output = string(out)
	status, err := os.ReadFile(filepath.Join(ctl, "status"))
	if err != nil {
		return res, fmt.Errorf("guest powered off without reporting the script's status (after %s); console tail:\n%s", res.Boot.Round(time.Millisecond), tail(res.Console, 4000))
	}
	code, err := strconv.Atoi(strings.TrimSpace(string(status)))
	if err != nil {
		return res, fmt.Errorf("guest reported status %q, not a number", strings.TrimSpace(string(status)))
	}
	res.ExitCode = code
	if code != 0 {
		return res, &ScriptError{ExitCode: code, Output: res.Output}
	}
	return res, nil
}

// writeControl fills the control directory the guest mounts at /ctl: the script, its
// environment and the wrapper that records output and status.
func writeControl(ctl string, opts Options) error {
	script, err := os.ReadFile(opts.Script)
	if err != nil {
		return fmt.Errorf("read guest script: %w", err)
	}
	if err := os.WriteFile(filepath.Join(ctl, "script"), script, 0o755); err != nil {
		return fmt.Errorf("write guest script: %w", err)
	}
	mounts := ""
	if opts.ShareDir != "" {
		mounts = "share\n"
	}
	if err := os.WriteFile(filepath.Join(ctl, "mounts"), []byte(mounts), 0o644); err != nil {
		return fmt.Errorf("write guest mounts: %w", err)
	}
	var b strings.Builder
	b.WriteString("# generated by hack/qemu: runs the test script, records its output and status\n")
	names := make([]string, 0, len(opts.Env))
	for k := range opts.Env {
		names = append(names, k)
	}
	sort.Strings(names)
	b.WriteString("export TABBY_GUEST=1\n")
	if len(opts.Forwards) > 0 {
		// The NIC of the restricted user network: forwarded host ports answer on its subnet.
		b.WriteString("modprobe virtio_net && ip link set eth0 up && ip addr add 10.0.2.15/24 dev eth0 || { echo 'tabby-qemu: guest network for the forwards failed' >&2; echo 125 >/ctl/status; exit; }\n")
		fmt.Fprintf(&b, "export TABBY_HOST_IP=%s\n", GuestForwardIP)
	}
	for _, k := range names {
		fmt.Fprintf(&b, "export %s=%s\n", k, shellQuote(opts.Env[k]))
	}
	b.WriteString("/usr/bin/bash /ctl/script")
	for _, a := range opts.Args {
		b.WriteString(" " + shellQuote(a))
	}
	b.WriteString(" 2>&1 </dev/null | tee /ctl/output\n")
	b.WriteString("echo \"${PIPESTATUS[0]}\" >/ctl/status.tmp && mv /ctl/status.tmp /ctl/status\n")
	if err := os.WriteFile(filepath.Join(ctl, "run.sh"), []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write guest wrapper: %w", err)
	}
	return nil
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "...\n" + s[len(s)-n:]
}
