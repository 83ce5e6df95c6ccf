// Package gobgpfork keeps tabby's fork of GoBGP (third_party/gobgp) as what it is: upstream
// GoBGP, trimmed to the packages tabby links, plus an ordered series of patches
// (third_party/gobgp/patches/NNNN-name.patch, each described in TABBY.md). It builds the fork
// from an upstream tag of the Go module proxy or from a git checkout of upstream, reports how
// each patch applies, checks that the series reproduces the fork byte for byte, turns a change
// committed to the fork into the next patch, and runs upstream's own tests against the fork.
package gobgpfork

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Module is upstream's module path.
const Module = "github.com/osrg/gobgp/v4"

// Fork is tabby's fork in a checkout of tabby.
type Fork struct {
	// Root is the checkout's root (the main module's directory).
	Root string
	// Base, when set, is the upstream the series applies to, instead of the version tabby's
	// go.mod requires.
	Base *Source
}

// base is the upstream the series applies to.
func (f Fork) base() (Source, error) {
	if f.Base != nil {
		return *f.Base, nil
	}
	v, err := f.BaseVersion()
	return Source{Version: v}, err
}

// Dir is the fork's module root.
func (f Fork) Dir() string { return filepath.Join(f.Root, "third_party", "gobgp") }

// PatchDir holds the series, the list of kept packages and the upstream tests' skip list.
func (f Fork) PatchDir() string { return filepath.Join(f.Dir(), "patches") }

// meta are the fork's own files, which are not upstream's and not made by the series.
var meta = []string{"TABBY.md", "patches", "upstream"}

func isMeta(rel string) bool {
	first, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
	return slices.Contains(meta, first)
}

// FindRoot returns the tabby checkout that holds dir.
func FindRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "third_party", "gobgp", "TABBY.md")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no tabby checkout (third_party/gobgp/TABBY.md) at or above %s", dir)
		}
	}
}

// BaseVersion is the upstream version the fork is based on: the one tabby's go.mod requires.
func (f Fork) BaseVersion() (string, error) {
	b, err := os.ReadFile(filepath.Join(f.Root, "go.mod"))
	if err != nil {
		return "", err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == Module && strings.HasPrefix(fields[1], "v") {
			return fields[1], nil
		}
		if len(fields) >= 3 && fields[0] == "require" && fields[1] == Module {
			return fields[2], nil
		}
	}
	return "", fmt.Errorf("go.mod: no requirement of %s", Module)
}

// Packages are the fork's packages, as directories relative to the module root
// (patches/packages).
func (f Fork) Packages() ([]string, error) {
	return readList(filepath.Join(f.PatchDir(), "packages"))
}

// readList reads a file of one entry per line; blank lines and lines starting with # are
// left out, and so is what follows a # on a line.
func readList(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseList(b), nil
}

// readOptionalList is readList of a file that may be missing (an empty list).
func readOptionalList(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return parseList(b), nil
}

func parseList(b []byte) []string {
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		line, _, _ = strings.Cut(line, "#")
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return out
}

// Patches are the series' files, in order.
func (f Fork) Patches() ([]string, error) {
	m, err := filepath.Glob(filepath.Join(f.PatchDir(), "[0-9][0-9][0-9][0-9]-*.patch"))
	if err != nil {
		return nil, err
	}
	slices.Sort(m)
	for i, p := range m {
		if want := fmt.Sprintf("%04d-", i+1); !strings.HasPrefix(filepath.Base(p), want) {
			return nil, fmt.Errorf("patch %s: expected a name starting with %s (the series is numbered from 0001 without gaps)", filepath.Base(p), want)
		}
	}
	return m, nil
}

// keptUpstreamFile says whether the fork keeps upstream's file rel (slash-separated, relative
// to upstream's module root): the module's go.mod, go.sum and LICENSE, and the files of the
// kept packages' directories that are not tests.
func keptUpstreamFile(pkgs []string, rel string) bool {
	switch rel {
	case "go.mod", "go.sum", "LICENSE":
		return true
	}
	dir, name := pathDir(rel), pathBase(rel)
	return slices.Contains(pkgs, dir) && !strings.HasSuffix(name, "_test.go")
}

func pathDir(rel string) string {
	if i := strings.LastIndex(rel, "/"); i >= 0 {
		return rel[:i]
	}
	return "."
}

func pathBase(rel string) string { return rel[strings.LastIndex(rel, "/")+1:] }

// treeFiles lists the regular files under dir, slash-separated and relative to it, without the
// fork's own files.
func treeFiles(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if rel != "." && isMeta(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	slices.Sort(out)
	return out, err
}

// copyTree copies the files of src that are not the fork's own into dst.
func copyTree(src, dst string) error {
	files, err := treeFiles(src)
	if err != nil {
		return err
	}
	for _, rel := range files {
		b, err := os.ReadFile(filepath.Join(src, rel))
		if err != nil {
			return err
		}
		if err := writeFile(filepath.Join(dst, rel), b); err != nil {
			return err
		}
	}
	return nil
}

func writeFile(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// Compare lists how tree b differs from tree a, leaving out the fork's own files: files only in
// one of them, and files whose bytes differ. Empty when they are the same.
func Compare(a, b string) ([]string, error) {
	fa, err := treeFiles(a)
	if err != nil {
		return nil, err
	}
	fb, err := treeFiles(b)
	if err != nil {
		return nil, err
	}
	var diffs []string
	for _, rel := range fa {
		if !slices.Contains(fb, rel) {
			diffs = append(diffs, "only in the series' result: "+rel)
			continue
		}
		x, err := os.ReadFile(filepath.Join(a, rel))
		if err != nil {
			return nil, err
		}
		y, err := os.ReadFile(filepath.Join(b, rel))
		if err != nil {
			return nil, err
		}
		if !bytes.Equal(x, y) {
			diffs = append(diffs, "differs: "+rel)
		}
	}
	for _, rel := range fb {
		if !slices.Contains(fa, rel) {
			diffs = append(diffs, "only in the fork: "+rel)
		}
	}
	return diffs, nil
}

// errConflict is returned when a patch of the series does not apply.
var errConflict = errors.New("a patch of the series does not apply")
