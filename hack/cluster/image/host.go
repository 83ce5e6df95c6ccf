package image

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// maxLinks bounds the symlinks followed while resolving one path, as the kernel's ELOOP does.
const maxLinks = 40

// HostFiles returns the Files that reproduce the host paths in the image at the same paths,
// so that a dynamically linked host binary runs there as it does on the host:
//
//   - every symlink met on the way is an image symlink with the same target (/lib -> usr/lib,
//     /usr/sbin/iptables-nft -> xtables-nft-multi), and the file it ends at is copied;
//   - an ELF executable or shared object brings its dynamic loader (PT_INTERP) and the shared
//     libraries it needs (DT_NEEDED, recursively), found as the loader would find them.
//
// Libraries a program opens at run time with dlopen (iptables' extensions, NSS modules) are not
// in DT_NEEDED: list them as paths too. A statically linked binary brings nothing else.
func HostFiles(paths ...string) ([]File, error) {
	r := &hostResolver{seen: map[string]bool{}, files: map[string]File{}}
	for _, p := range paths {
		if err := r.add(p); err != nil {
			return nil, err
		}
	}
	out := make([]File, 0, len(r.order))
	for _, p := range r.order {
		out = append(out, r.files[p])
	}
	return out, nil
}

// Libraries returns the host paths of the dynamic loader and of every shared library the ELF
// file at p needs, directly or through another library, as the loader finds them (before any
// symlink is resolved: /lib/x86_64-linux-gnu/libc.so.6). A static binary needs none.
func Libraries(p string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	var walk func(string) error
	walk = func(p string) error {
		deps, err := elfDeps(p)
		if err != nil {
			return err
		}
		for _, d := range deps {
			if seen[d] {
				continue
			}
			seen[d] = true
			out = append(out, d)
			if err := walk(d); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(p); err != nil {
		return nil, err
	}
	return out, nil
}

type hostResolver struct {
	seen  map[string]bool // host paths already added
	files map[string]File
	order []string
}

func (r *hostResolver) put(f File) {
	if _, ok := r.files[f.Path]; !ok {
		r.order = append(r.order, f.Path)
	}
	r.files[f.Path] = f
}

// add adds host path p: its symlinks, the regular file it resolves to and, for an ELF file,
// what that file needs.
func (r *hostResolver) add(p string) error {
	if !filepath.IsAbs(p) {
		return fmt.Errorf("host file %q: path must be absolute", p)
	}
	p = filepath.Clean(p)
	if r.seen[p] {
		return nil
	}
	r.seen[p] = true
	real, err := r.resolve(p)
	if err != nil {
		return fmt.Errorf("host file %s: %w", p, err)
	}
	st, err := os.Stat(real)
	if err != nil {
		return fmt.Errorf("host file %s: %w", p, err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("host file %s: %s is not a regular file", p, real)
	}
	r.put(File{Path: real, Src: real})
	deps, err := elfDeps(real)
	if err != nil {
		return fmt.Errorf("host file %s: %w", p, err)
	}
	for _, d := range deps {
		if err := r.add(d); err != nil {
			return fmt.Errorf("%s needs %w", p, err)
		}
	}
	return nil
}

// resolve follows p component by component, records every symlink met as an image symlink,
// and returns the symlink-free path p ends at.
func (r *hostResolver) resolve(p string) (string, error) {
	links := 0
	done := "/"                                            // resolved prefix, free of symlinks
	rest := strings.Split(strings.TrimPrefix(p, "/"), "/") // components still to walk
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			// done is free of symlinks, so ".." is lexical here, as in the kernel.
			done = path.Dir(done)
			continue
		}
		next := path.Join(done, name)
		st, err := os.Lstat(next)
		if err != nil {
			return "", err
		}
		if st.Mode()&fs.ModeSymlink == 0 {
			done = next
			continue
		}
		if links++; links > maxLinks {
			return "", fmt.Errorf("too many symlinks")
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		r.put(Symlink(next, target))
		if path.IsAbs(target) {
			done = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return done, nil
}

// elfDeps returns the host paths of the loader and the libraries the ELF file at p names
// directly; nil for a file that is not ELF or is statically linked.
func elfDeps(p string) ([]string, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	magic := make([]byte, 4)
	if _, err := io.ReadFull(f, magic); err != nil || !bytes.Equal(magic, []byte(elf.ELFMAG)) {
		return nil, nil // a script, a data file or an empty file
	}
	ef, err := elf.NewFile(f)
	if err != nil {
		return nil, fmt.Errorf("read ELF %s: %w", p, err)
	}
	var deps []string
	for _, prog := range ef.Progs {
		if prog.Type != elf.PT_INTERP {
			continue
		}
		b, err := io.ReadAll(prog.Open())
		if err != nil {
			return nil, fmt.Errorf("read ELF interpreter of %s: %w", p, err)
		}
		deps = append(deps, string(bytes.TrimRight(b, "\x00")))
	}
	needed, err := ef.DynString(elf.DT_NEEDED)
	if err != nil {
		if errors.Is(err, elf.ErrNoSymbols) {
			return deps, nil
		}
		return nil, fmt.Errorf("read DT_NEEDED of %s: %w", p, err)
	}
	dirs, err := searchDirs(ef, p)
	if err != nil {
		return nil, err
	}
	for _, name := range needed {
		lib, err := findLibrary(name, dirs, ef)
		if err != nil {
			return nil, fmt.Errorf("library of %s: %w", p, err)
		}
		deps = append(deps, lib)
	}
	return deps, nil
}

// multiarch is the Debian multiarch directory name of an ELF machine.
var multiarch = map[elf.Machine]string{
	elf.EM_X86_64:  "x86_64-linux-gnu",
	elf.EM_AARCH64: "aarch64-linux-gnu",
}

// searchDirs is where the loader looks for the libraries of ef: its DT_RPATH or DT_RUNPATH
// ($ORIGIN is the directory of p), then the system directories. No ld.so.cache: the image has
// none either, so the libraries must be where the loader's built-in list finds them.
func searchDirs(ef *elf.File, p string) ([]string, error) {
	var dirs []string
	for _, tag := range []elf.DynTag{elf.DT_RPATH, elf.DT_RUNPATH} {
		vals, err := ef.DynString(tag)
		if err != nil {
			return nil, fmt.Errorf("read %v of %s: %w", tag, p, err)
		}
		for _, v := range vals {
			for _, d := range strings.Split(v, ":") {
				d = strings.ReplaceAll(d, "$ORIGIN", filepath.Dir(p))
				d = strings.ReplaceAll(d, "${ORIGIN}", filepath.Dir(p))
				if filepath.IsAbs(d) {
					dirs = append(dirs, filepath.Clean(d))
				}
			}
		}
	}
	if ma, ok := multiarch[ef.Machine]; ok {
		dirs = append(dirs, "/lib/"+ma, "/usr/lib/"+ma)
	}
	if ef.Class == elf.ELFCLASS64 {
		dirs = append(dirs, "/lib64", "/usr/lib64")
	}
	return append(dirs, "/lib", "/usr/lib"), nil
}

// findLibrary returns the first file called name in dirs that is an ELF object of the same
// class and machine as ef (a 32-bit libc of the same name is skipped, as the loader does).
func findLibrary(name string, dirs []string, ef *elf.File) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, d := range dirs {
		cand := filepath.Join(d, name)
		lf, err := elf.Open(cand)
		if err != nil {
			continue
		}
		ok := lf.Class == ef.Class && lf.Machine == ef.Machine
		lf.Close()
		if ok {
			return cand, nil
		}
	}
	return "", fmt.Errorf("%s not found in %s", name, strings.Join(dirs, ":"))
}
