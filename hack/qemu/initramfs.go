package qemu

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

//go:embed init.sh
var initScript []byte

// DefaultHostTools are the host programs copied into every guest. busybox provides the rest, but
// its `ip` applet has no netns and the busybox shell prefers its applets over PATH, hence the
// real iproute2 and bash. Paths are looked up on the host as given; symlinks on the way (merged
// /usr, /etc/alternatives) are reproduced in the guest so argv[0] dispatch keeps working.
var DefaultHostTools = []string{
	"/usr/bin/bash",
	"/usr/sbin/ip",
	"/usr/bin/ping",
	"/usr/bin/tcpdump",
	"/usr/sbin/iptables", "/usr/sbin/iptables-save", "/usr/sbin/iptables-restore",
	"/usr/sbin/iptables-legacy", "/usr/sbin/iptables-legacy-save", "/usr/sbin/iptables-legacy-restore",
	"/usr/sbin/iptables-nft", "/usr/sbin/iptables-nft-save", "/usr/sbin/iptables-nft-restore",
	"/usr/lib/x86_64-linux-gnu/xtables", // iptables dlopens its matches and targets from here
	"/usr/sbin/ipset",
	"/usr/sbin/conntrack",
	// The kernel runs /sbin/modprobe to load modules on demand (nf_tables, an iptables match, a
	// link type): the /sbin path itself must resolve in the guest.
	"/sbin/modprobe", "/usr/sbin/modprobe", "/usr/sbin/insmod", "/usr/sbin/lsmod", "/usr/sbin/rmmod",
	"/bin/sh", // for #!/bin/sh scripts (dash on Debian)
}

// requiredHostTools must exist; the others in DefaultHostTools are skipped when absent.
var requiredHostTools = map[string]bool{
	"/usr/bin/bash": true, "/usr/sbin/ip": true, "/usr/bin/ping": true,
	"/usr/bin/tcpdump": true, "/usr/sbin/modprobe": true, "/sbin/modprobe": true, "/bin/sh": true,
}

const busyboxPath = "/bin/busybox"

// guestEtc are small files the host tools look up (tcpdump drops privileges to its own user).
var guestEtc = map[string]string{
	"etc/passwd":   "root:x:0:0:root:/root:/usr/bin/bash\ntcpdump:x:100:101::/nonexistent:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
	"etc/group":    "root:x:0:\ntcpdump:x:101:\nnogroup:x:65534:\n",
	"etc/hosts":    "127.0.0.1 localhost\n",
	"etc/hostname": "tabby-guest\n",
}

// collector mirrors host files into an archive, following every symlink on the way.
type collector struct {
	a   *archive
	elf []string // host paths of ELF files, for ldd
}

// addHost adds host path p (file, directory tree or symlink chain) at the same path in the guest.
func (c *collector) addHost(p string) error {
	return c.addHostDepth(p, 0)
}

func (c *collector) addHostDepth(p string, depth int) error {
	if depth > 40 {
		return fmt.Errorf("add %s to initramfs: too many levels of symlinks", p)
	}
	p = path.Clean(p)
	// Walk the components: a symlink anywhere in the path (merged /usr's /lib -> usr/lib) is
	// reproduced in the guest, then the walk continues at its target.
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	cur := "/"
	for i, part := range parts {
		next := path.Join(cur, part)
		fi, err := os.Lstat(next)
		if err != nil {
			return fmt.Errorf("add %s to initramfs: %w", p, err)
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(next)
			if err != nil {
				return fmt.Errorf("add %s to initramfs: %w", p, err)
			}
			if err := c.a.add(&entry{name: next, mode: modeSymlink | 0o777, link: target, size: int64(len(target))}); err != nil {
				return err
			}
			resolved := target
			if !path.IsAbs(target) {
				resolved = path.Join(cur, target)
			}
			rest := append([]string{resolved}, parts[i+1:]...)
			return c.addHostDepth(path.Join(rest...), depth+1)
		}
		cur = next
	}
	fi, err := os.Stat(cur)
	if err != nil {
		return fmt.Errorf("add %s to initramfs: %w", p, err)
	}
	if fi.IsDir() {
		des, err := os.ReadDir(cur)
		if err != nil {
			return fmt.Errorf("add %s to initramfs: %w", p, err)
		}
		if err := c.a.add(&entry{name: cur, mode: modeDir | 0o755}); err != nil {
			return err
		}
		for _, de := range des {
			if err := c.addHostDepth(path.Join(cur, de.Name()), depth); err != nil {
				return err
			}
		}
		return nil
	}
	if !fi.Mode().IsRegular() {
		return nil // sockets, fifos: nothing a guest tool needs
	}
	if _, ok := c.a.entries[strings.TrimPrefix(cur, "/")]; ok {
		return nil
	}
	if err := c.a.add(&entry{name: cur, mode: modeRegular | uint32(fi.Mode().Perm()), hostPath: cur, size: fi.Size()}); err != nil {
		return err
	}
	if isELF(cur) {
		c.elf = append(c.elf, cur)
	}
	return nil
}

func isELF(p string) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	var magic [4]byte
	if _, err := io.ReadFull(f, magic[:]); err != nil {
		return false
	}
	return string(magic[:]) == "\x7fELF"
}

// addLibraries adds every shared library ldd names for the ELF files collected so far, and the
// dynamic loader, until nothing new appears (a library's own dependencies are in ldd's output
// already, but a dlopened xtables module's are only found by asking about it).
func (c *collector) addLibraries(ctx context.Context) error {
	seen := map[string]bool{}
	for {
		var todo []string
		for _, p := range c.elf {
			if !seen[p] {
				seen[p] = true
				todo = append(todo, p)
			}
		}
		if len(todo) == 0 {
			return nil
		}
		libs, err := lddLibraries(ctx, todo)
		if err != nil {
			return err
		}
		for _, l := range libs {
			if err := c.addHost(l); err != nil {
				return err
			}
		}
	}
}

// lddLibraries runs ldd over files and returns the library paths it resolved.
func lddLibraries(ctx context.Context, files []string) ([]string, error) {
	cmd := exec.CommandContext(ctx, "ldd", files...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	// ldd exits non-zero when any file is static ("not a dynamic executable"): that is fine,
	// busybox and static Go binaries need nothing. Unresolved libraries are not.
	runErr := cmd.Run()
	if out.Len() == 0 && runErr != nil {
		return nil, fmt.Errorf("ldd %s: %w", strings.Join(files, " "), runErr)
	}
	set := map[string]bool{}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.Contains(line, "=> not found"):
			return nil, fmt.Errorf("ldd: a library is missing on the host: %s", line)
		case strings.Contains(line, "=> /"):
			lib := strings.Fields(line[strings.Index(line, "=> ")+3:])[0]
			set[lib] = true
		case strings.HasPrefix(line, "/") && strings.Contains(line, " (0x"):
			set[strings.Fields(line)[0]] = true // the dynamic loader
		}
	}
	libs := make([]string, 0, len(set))
	for l := range set {
		libs = append(libs, l)
	}
	sort.Strings(libs)
	return libs, nil
}

// buildInitramfs returns the path of a cached initramfs holding busybox, the init script, the
// host tools (with their libraries) and the kernel's module subset. The cache key is the content
// of every member, so a changed host tool or kernel gives a new archive.
func buildInitramfs(ctx context.Context, k Kernel, extraTools []string) (string, error) {
	// Host tools do not change while a test binary runs: reuse the archive found earlier and
	// skip the ldd and hashing work on every later boot.
	memoKey := k.Dir + "\x00" + strings.Join(extraTools, "\x00")
	initrdMemoMu.Lock()
	defer initrdMemoMu.Unlock()
	if p, ok := initrdMemo[memoKey]; ok {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	p, err := buildInitramfsUncached(ctx, k, extraTools)
	if err != nil {
		return "", err
	}
	initrdMemo[memoKey] = p
	return p, nil
}

var (
	initrdMemoMu sync.Mutex
	initrdMemo   = map[string]string{}
)

func buildInitramfsUncached(ctx context.Context, k Kernel, extraTools []string) (string, error) {
	c := &collector{a: newArchive()}
	if err := c.addHost(busyboxPath); err != nil {
		return "", fmt.Errorf("busybox (package busybox-static): %w", err)
	}
	if isELF(busyboxPath) {
		libs, err := lddLibraries(ctx, []string{busyboxPath})
		if err != nil {
			return "", err
		}
		if len(libs) > 0 {
			return "", fmt.Errorf("%s is dynamically linked: install busybox-static", busyboxPath)
		}
		c.elf = c.elf[:0]
	}
	for _, t := range DefaultHostTools {
		if _, err := os.Lstat(t); err != nil && !requiredHostTools[t] {
			continue
		}
		if err := c.addHost(t); err != nil {
			return "", err
		}
	}
	for _, t := range extraTools {
		if err := c.addHost(t); err != nil {
			return "", fmt.Errorf("extra host tool: %w", err)
		}
	}
	if err := c.addLibraries(ctx); err != nil {
		return "", err
	}

	// Modules go where the guest's /lib/modules resolves to (usr/lib under merged /usr).
	modDir := "lib/modules/" + k.Version
	if t, err := os.Readlink("/lib"); err == nil {
		if err := c.a.add(&entry{name: "lib", mode: modeSymlink | 0o777, link: t, size: int64(len(t))}); err != nil {
			return "", err
		}
		modDir = strings.TrimPrefix(path.Join("/", t), "/") + "/modules/" + k.Version
	}
	hostMods := filepath.Join(k.Dir, "lib", "modules", k.Version)
	err := filepath.WalkDir(hostMods, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(hostMods, p)
		name := path.Join(modDir, filepath.ToSlash(rel))
		if d.IsDir() {
			return c.a.add(&entry{name: name, mode: modeDir | 0o755})
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		return c.a.add(&entry{name: name, mode: modeRegular | 0o644, hostPath: p, size: fi.Size()})
	})
	if err != nil {
		return "", fmt.Errorf("add kernel modules from %s: %w", hostMods, err)
	}

	bootMods, err := os.ReadFile(filepath.Join(k.Dir, "modules.boot"))
	if err != nil {
		return "", fmt.Errorf("kernel %s: %w (run hack/qemu/prepare.sh)", k.Dir, err)
	}
	inline := map[string][]byte{
		"init":                   initScript,
		"etc/tabby-qemu/modules": bootMods,
		"etc/tabby-qemu/kernel":  []byte(k.Version + "\n"),
	}
	for name, content := range guestEtc {
		inline[name] = []byte(content)
	}
	for name, data := range inline {
		mode := uint32(0o644)
		if name == "init" {
			mode = 0o755
		}
		if err := c.a.add(&entry{name: name, mode: modeRegular | mode, data: data, size: int64(len(data))}); err != nil {
			return "", err
		}
	}
	for _, d := range []string{"proc", "sys", "dev", "tmp", "run", "mnt", "ctl", "bb", "root", "var"} {
		if err := c.a.add(&entry{name: d, mode: modeDir | 0o755}); err != nil {
			return "", err
		}
	}
	// The kernel opens /dev/console for init before anything is mounted: without this node
	// init would start with no stdout.
	if err := c.a.add(&entry{name: "dev/console", mode: modeCharDev | 0o600, rdevMaj: 5, rdevMin: 1}); err != nil {
		return "", err
	}

	key, err := c.a.key()
	if err != nil {
		return "", err
	}
	out := filepath.Join(k.CacheDir, "initramfs-"+key[:16]+".cpio")
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	tmp, err := os.CreateTemp(k.CacheDir, ".initramfs-*.tmp")
	if err != nil {
		return "", fmt.Errorf("create initramfs: %w", err)
	}
	defer os.Remove(tmp.Name())
	bw := bufio.NewWriterSize(tmp, 1<<20)
	if err := c.a.writeNewc(bw, func(p string) (io.ReadCloser, error) { return os.Open(p) }); err != nil {
		tmp.Close()
		return "", fmt.Errorf("write initramfs: %w", err)
	}
	if err := bw.Flush(); err != nil {
		tmp.Close()
		return "", fmt.Errorf("write initramfs: %w", err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return "", fmt.Errorf("write initramfs: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("write initramfs: %w", err)
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return "", fmt.Errorf("install initramfs: %w", err)
	}
	removeStaleInitramfs(k.CacheDir, out)
	slog.Info("built guest initramfs", "path", out, "members", len(c.a.entries))
	return out, nil
}

// key hashes every member (name, mode and content) into the cache key.
func (a *archive) key() (string, error) {
	h := sha256.New()
	for _, e := range a.sorted() {
		sum := e.sum
		if e.hostPath != "" && sum == "" {
			f, err := os.Open(e.hostPath)
			if err != nil {
				return "", fmt.Errorf("hash %s: %w", e.hostPath, err)
			}
			fh := sha256.New()
			_, err = io.Copy(fh, f)
			f.Close()
			if err != nil {
				return "", fmt.Errorf("hash %s: %w", e.hostPath, err)
			}
			sum = hex.EncodeToString(fh.Sum(nil))
			e.sum = sum
		} else if e.hostPath == "" {
			s := sha256.Sum256(append([]byte(e.link), e.data...))
			sum = hex.EncodeToString(s[:])
		}
		fmt.Fprintf(h, "%s\x00%o\x00%d:%d\x00%s\n", e.name, e.mode, e.rdevMaj, e.rdevMin, sum)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// removeStaleInitramfs deletes archives an hour older than keep: host tools changed and they
// will not be asked for again (the hour spares a run that is just starting qemu with one).
// Failure only costs disk space, so it is logged, not returned.
func removeStaleInitramfs(dir, keep string) {
	old, _ := filepath.Glob(filepath.Join(dir, "initramfs-*.cpio"))
	kfi, err := os.Stat(keep)
	if err != nil {
		return
	}
	for _, p := range old {
		if p == keep {
			continue
		}
		if fi, err := os.Stat(p); err == nil && fi.ModTime().Before(kfi.ModTime().Add(-time.Hour)) {
			if err := os.Remove(p); err != nil {
				slog.Warn("remove stale initramfs", "path", p, "err", err)
			}
		}
	}
}
