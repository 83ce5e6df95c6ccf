package image

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// iptablesNFT is Debian's iptables-nft: a symlink to the multi-call binary.
const iptablesNFT = "/usr/sbin/iptables-nft"

func needHostFile(t *testing.T, p string) {
	t.Helper()
	if _, err := os.Stat(p); err != nil {
		t.Skipf("%s not on this host: %v", p, err)
	}
}

func TestLibraries(t *testing.T) {
	needHostFile(t, iptablesNFT)
	libs, err := Libraries(iptablesNFT)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"libc.so.6": false, "libxtables.so.12": false, "libnftnl.so.11": false, "libmnl.so.0": false, "ld-linux-x86-64.so.2": false}
	for _, l := range libs {
		if _, ok := want[filepath.Base(l)]; ok {
			want[filepath.Base(l)] = true
		}
		if !filepath.IsAbs(l) {
			t.Errorf("library path %q is not absolute", l)
		}
	}
	for name, found := range want {
		if !found {
			t.Errorf("%s: %s not among %v", iptablesNFT, name, libs)
		}
	}
	if !slices.Contains(libs, "/lib64/ld-linux-x86-64.so.2") {
		t.Errorf("the loader /lib64/ld-linux-x86-64.so.2 not among %v", libs)
	}
}

// A statically linked binary and a non-ELF file need nothing.
func TestLibrariesNone(t *testing.T) {
	script := filepath.Join(t.TempDir(), "s")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	paths := []string{script}
	if _, err := os.Stat("/bin/busybox"); err == nil { // busybox-static
		paths = append(paths, "/bin/busybox")
	}
	for _, p := range paths {
		libs, err := Libraries(p)
		if err != nil || len(libs) != 0 {
			t.Errorf("Libraries(%s) = %v, %v; want none", p, libs, err)
		}
	}
}

// HostFiles keeps every symlink on the way, relative and absolute, in the image.
func TestHostFilesSymlinks(t *testing.T) {
	d := t.TempDir()
	mk := func(p string) {
		if err := os.MkdirAll(filepath.Join(d, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ln := func(target, p string) {
		if err := os.Symlink(target, filepath.Join(d, p)); err != nil {
			t.Fatal(err)
		}
	}
	mk("usr/lib/x")
	if err := os.WriteFile(filepath.Join(d, "usr/lib/x/real"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	ln("usr/lib", "lib")                                 // relative directory link
	ln("real", "usr/lib/x/alias")                        // relative file link
	ln(filepath.Join(d, "lib/x/alias"), "usr/lib/x/abs") // absolute, through both
	ln("../lib/./x/../x/real", "usr/dotted")             // dots in a target
	files, err := HostFiles(filepath.Join(d, "usr/lib/x/abs"), filepath.Join(d, "usr/dotted"), filepath.Join(d, "lib/x/real"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]File{}
	for _, f := range files {
		if _, dup := got[f.Path]; dup {
			t.Errorf("%s listed twice", f.Path)
		}
		got[f.Path] = f
	}
	want := map[string]File{
		filepath.Join(d, "usr/lib/x/abs"):   Symlink(filepath.Join(d, "usr/lib/x/abs"), filepath.Join(d, "lib/x/alias")),
		filepath.Join(d, "lib"):             Symlink(filepath.Join(d, "lib"), "usr/lib"),
		filepath.Join(d, "usr/lib/x/alias"): Symlink(filepath.Join(d, "usr/lib/x/alias"), "real"),
		filepath.Join(d, "usr/dotted"):      Symlink(filepath.Join(d, "usr/dotted"), "../lib/./x/../x/real"),
		filepath.Join(d, "usr/lib/x/real"):  Copy(filepath.Join(d, "usr/lib/x/real"), filepath.Join(d, "usr/lib/x/real")),
	}
	if len(got) != len(want) {
		t.Errorf("HostFiles: %d files %v, want %d", len(got), files, len(want))
	}
	for p, w := range want {
		if g, ok := got[p]; !ok || !g.same(w) {
			t.Errorf("%s: got %+v, want %+v", p, g, w)
		}
	}
	// The files make a valid image: no file lies under a symlink.
	if err := Write(io.Discard, Image{Ref: "example.com/a:1", Files: files}); err != nil {
		t.Error(err)
	}
	if _, err := HostFiles(filepath.Join(d, "missing")); err == nil {
		t.Error("HostFiles of a missing file succeeded")
	}
	ln("loop", "loop")
	if _, err := HostFiles(filepath.Join(d, "loop")); err == nil {
		t.Error("HostFiles of a symlink loop succeeded")
	}
}

// The host's iptables and ipset, with what HostFiles brings along, run in a root of their own:
// the libraries are found without an ld.so.cache and the symlinks resolve.
func TestHostFilesRun(t *testing.T) {
	needHostFile(t, iptablesNFT)
	needHostFile(t, "/usr/sbin/ipset")
	if os.Geteuid() != 0 {
		t.Skip("chroot needs root")
	}
	files, err := HostFiles(iptablesNFT, "/usr/sbin/iptables-legacy-save", "/usr/sbin/ipset")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(files, func(f File) bool { return f.Src != "" && strings.HasPrefix(filepath.Base(f.Path), "libc.so") }) {
		t.Fatalf("no libc among %v", files)
	}
	var b bytes.Buffer
	if err := Write(&b, Image{Ref: "example.com/iptables:1", Files: files}); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	p := parse(t, b.Bytes())
	for _, name := range p.order {
		e := p.layer[name]
		dst := filepath.Join(root, name)
		switch e.hdr.Typeflag {
		case tar.TypeDir:
			err = os.Mkdir(dst, os.FileMode(e.hdr.Mode).Perm())
		case tar.TypeSymlink:
			err = os.Symlink(e.hdr.Linkname, dst)
		case tar.TypeReg:
			err = os.WriteFile(dst, e.data, os.FileMode(e.hdr.Mode).Perm())
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{
		{iptablesNFT, "--version"},
		{"/usr/sbin/iptables-legacy-save", "--version"},
		{"/usr/sbin/ipset", "--version"},
	} {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
		cmd.Dir = "/"
		cmd.Env = []string{"PATH=/usr/sbin:/usr/bin"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("%v in the image's root: %v: %s", args, err, out)
			continue
		}
		t.Logf("%v: %s", args, bytes.TrimSpace(out))
	}
}
