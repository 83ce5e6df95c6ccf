package gobgpfork

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
	lines, err := readOptionalList(filepath.Join(f.TestsDir(), "skip"))
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

// testsTree writes into dir the fork with upstream's tests of its packages (from the base
// version on the Go module proxy, never kept in tabby's tree), adapted by
// upstream-tests/*.patch, and says which files are upstream's tests.
func (f Fork) testsTree(ctx context.Context, dir string, out io.Writer) (isTest func(rel string) bool, err error) {
	base, err := f.base()
	if err != nil {
		return nil, err
	}
	pkgs, err := f.Packages()
	if err != nil {
		return nil, err
	}
	if err := copyTree(f.Dir(), dir); err != nil {
		return nil, err
	}
	// Files outside the kept packages that upstream's tests read (upstream-tests/files).
	extra, err := readOptionalList(filepath.Join(f.TestsDir(), "files"))
	if err != nil {
		return nil, err
	}
	isTest = func(rel string) bool {
		return (upstreamTestFile(pkgs, rel) && !strings.HasPrefix(pathBase(rel), "tabby_")) || slices.Contains(extra, rel)
	}
	if err := base.Extract(ctx, dir, isTest); err != nil {
		return nil, err
	}
	patches, err := filepath.Glob(filepath.Join(f.TestsDir(), "*.patch"))
	if err != nil {
		return nil, err
	}
	slices.Sort(patches)
	fmt.Fprintf(out, "upstream's tests of %s, adapted to the fork:\n", base)
	if _, err := ApplySeries(ctx, dir, patches, out); err != nil {
		return nil, fmt.Errorf("adapting upstream's tests: %w", err)
	}
	return isTest, nil
}

// UpstreamTests runs upstream's tests of every kept package against a copy of the fork, leaving
// out the tests of the skip list, and the slow ones unless all. With work set, the copy is made
// there and kept (for adapting a test: NewTestPatch).
func (f Fork) UpstreamTests(ctx context.Context, all bool, work string, goTestArgs []string, out io.Writer) error {
	pkgs, err := f.Packages()
	if err != nil {
		return err
	}
	skips, err := f.Skips()
	if err != nil {
		return err
	}
	tmp := work
	if tmp == "" {
		if tmp, err = os.MkdirTemp("", "gobgpfork-tests-"); err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
	} else if entries, err := os.ReadDir(tmp); err == nil && len(entries) > 0 {
		return fmt.Errorf("-work %s: not empty", tmp)
	}
	if _, err := f.testsTree(ctx, tmp, out); err != nil {
		return err
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

// NewTestPatch writes how upstream's tests in work (a tree UpstreamTests -work made, then
// edited) differ from the adapted tests as the next patch of upstream-tests/, named after the
// fork's patch whose change the tests are adapted to.
func (f Fork) NewTestPatch(ctx context.Context, name, work string, report io.Writer) (string, error) {
	if !regexp.MustCompile(`^[0-9]{4}-[a-z0-9][a-z0-9-]*$`).MatchString(name) {
		return "", fmt.Errorf("test patch name %q: the fork's patch it goes with, without .patch (0013-bfd-admin-down)", name)
	}
	path := filepath.Join(f.TestsDir(), name+".patch")
	if _, err := os.Stat(path); err == nil {
		return "", fmt.Errorf("%s exists", path)
	}
	tmp, err := os.MkdirTemp("", "gobgpfork-testpatch-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	isTest, err := f.testsTree(ctx, filepath.Join(tmp, "fresh"), io.Discard)
	if err != nil {
		return "", err
	}
	for side, src := range map[string]string{"a": filepath.Join(tmp, "fresh"), "b": work} {
		files, err := treeFiles(src)
		if err != nil {
			return "", err
		}
		for _, rel := range files {
			if !isTest(rel) {
				continue
			}
			b, err := os.ReadFile(filepath.Join(src, rel))
			if err != nil {
				return "", err
			}
			if err := writeFile(filepath.Join(tmp, side, rel), b); err != nil {
				return "", err
			}
		}
	}
	diff, err := Diff(ctx, tmp, "a", "b")
	if err != nil {
		return "", err
	}
	if len(diff) == 0 {
		return "", fmt.Errorf("upstream's tests in %s are as adapted already", work)
	}
	header := "Upstream's tests adapted to the fork's patch of the same name (TABBY.md: Upstream's tests).\n\n"
	if err := writeFile(path, append([]byte(header), diff...)); err != nil {
		return "", err
	}
	fmt.Fprintf(report, "wrote %s\n", path)
	return path, nil
}
