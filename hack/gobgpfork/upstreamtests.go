package gobgpfork

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// TestsDir holds what upstream's tests need to run against the fork: patches that adapt them to
// the fork's internals (NNNN-name.patch, named after the fork's patch that changed what they
// use), and the list of tests left out (skip).
func (f Fork) TestsDir() string { return filepath.Join(f.PatchDir(), "upstream-tests") }

// Skip is a test of upstream's that make test leaves out.
type Skip struct {
	Package, Test string
	// Slow: the test passes, and is run only by the full run (make test-gobgp-upstream).
	Slow   bool
	Reason string
}

// Skips reads upstream-tests/skip: "package Test skip|slow reason", one a line.
func (f Fork) Skips() ([]Skip, error) {
	lines, err := readList(filepath.Join(f.TestsDir(), "skip"))
	if err != nil {
		return nil, err
	}
	var out []Skip
	for _, line := range lines {
		fields := strings.Fields(line)
		if len(fields) < 4 || (fields[2] != "skip" && fields[2] != "slow") {
			return nil, fmt.Errorf("upstream-tests/skip: %q: want \"package Test skip|slow reason\"", line)
		}
		out = append(out, Skip{Package: fields[0], Test: fields[1], Slow: fields[2] == "slow", Reason: strings.Join(fields[3:], " ")})
	}
	return out, nil
}

// UpstreamTests runs upstream's tests of every kept package (from the base version on the Go
// module proxy, never kept in tabby's tree) against a copy of the fork, leaving out the tests
// of the skip list, and the slow ones unless all.
func (f Fork) UpstreamTests(ctx context.Context, all bool, goTestArgs []string, out io.Writer) error {
	base, err := f.BaseVersion()
	if err != nil {
		return err
	}
	pkgs, err := f.Packages()
	if err != nil {
		return err
	}
	skips, err := f.Skips()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "gobgpfork-tests-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := copyTree(f.Dir(), tmp); err != nil {
		return err
	}
	// Files outside the kept packages that upstream's tests read (upstream-tests/files).
	extra, err := readList(filepath.Join(f.TestsDir(), "files"))
	if err != nil {
		return err
	}
	keep := func(rel string) bool { return upstreamTestFile(pkgs, rel) || slices.Contains(extra, rel) }
	if err := (Source{Version: base}).Extract(ctx, tmp, keep); err != nil {
		return err
	}
	patches, err := filepath.Glob(filepath.Join(f.TestsDir(), "*.patch"))
	if err != nil {
		return err
	}
	slices.Sort(patches)
	fmt.Fprintf(out, "upstream's tests of %s, adapted to the fork:\n", base)
	if _, err := ApplySeries(ctx, tmp, patches, out); err != nil {
		return fmt.Errorf("adapting upstream's tests: %w", err)
	}

	// One go test per package with tests left out (-skip is by name, for all the packages of
	// a run), and one for the others.
	left := map[string][]string{}
	for _, s := range skips {
		if !slices.Contains(pkgs, s.Package) {
			return fmt.Errorf("upstream-tests/skip: %s is no package of the fork", s.Package)
		}
		if s.Slow && all {
			continue
		}
		left[s.Package] = append(left[s.Package], s.Test)
	}
	var plain []string
	var failed []string
	for _, p := range pkgs {
		names, ok := left[p]
		if !ok {
			plain = append(plain, "./"+p)
			continue
		}
		args := append([]string{"test", "-count=1", "-skip", "^(" + strings.Join(names, "|") + ")$"}, goTestArgs...)
		if err := goTest(ctx, tmp, append(args, "./"+p), out); err != nil {
			failed = append(failed, p)
		}
	}
	if err := goTest(ctx, tmp, append(append([]string{"test", "-count=1"}, goTestArgs...), plain...), out); err != nil {
		failed = append(failed, strings.Join(plain, " "))
	}
	if len(failed) > 0 {
		return fmt.Errorf("upstream's tests failed against the fork: %s", strings.Join(failed, "; "))
	}
	return nil
}

func goTest(ctx context.Context, dir string, args []string, out io.Writer) error {
	fmt.Fprintf(out, "go %s\n", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out, out
	return cmd.Run()
}

// upstreamTestFile says whether rel is one of upstream's tests of a kept package: a _test.go
// file in its directory, or anything under its testdata.
func upstreamTestFile(pkgs []string, rel string) bool {
	dir, name := pathDir(rel), pathBase(rel)
	if slices.Contains(pkgs, dir) && strings.HasSuffix(name, "_test.go") {
		return true
	}
	for _, p := range pkgs {
		if strings.HasPrefix(rel, p+"/testdata/") {
			return true
		}
	}
	return false
}
