package gobgpfork

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// UpstreamDir holds the fixes of upstream bugs written for upstream itself (git format-patch
// files against the full upstream tree of the base version).
func (f Fork) UpstreamDir() string { return filepath.Join(f.Dir(), "upstream") }

var (
	addedTestRE   = regexp.MustCompile(`(?m)^\+func (Test\w+)\(t \*testing\.T\)`)
	changedFileRE = regexp.MustCompile(`(?m)^\+\+\+ b/(\S+)$`)
)

// CheckUpstreamPatches applies each patch of upstream/ to the full upstream tree of the base
// version, alone, and runs the tests it adds: they must fail with the patch's tests alone, and
// pass, count times, with all of it.
func (f Fork) CheckUpstreamPatches(ctx context.Context, count int, out io.Writer) error {
	base, err := f.base()
	if err != nil {
		return err
	}
	patches, err := filepath.Glob(filepath.Join(f.UpstreamDir(), "*.patch"))
	if err != nil {
		return err
	}
	slices.Sort(patches)
	if len(patches) == 0 {
		return fmt.Errorf("no patches in %s", f.UpstreamDir())
	}
	var failed []string
	for _, p := range patches {
		if err := checkUpstreamPatch(ctx, base, p, count, out); err != nil {
			fmt.Fprintf(out, "%s: %v\n", filepath.Base(p), err)
			failed = append(failed, filepath.Base(p))
			continue
		}
		fmt.Fprintf(out, "%s: applies to %s; its tests fail without the fix and pass with it\n", filepath.Base(p), base)
	}
	if len(failed) > 0 {
		return fmt.Errorf("upstream patches: %s", strings.Join(failed, ", "))
	}
	return nil
}

func checkUpstreamPatch(ctx context.Context, base Source, patch string, count int, out io.Writer) error {
	b, err := os.ReadFile(patch)
	if err != nil {
		return err
	}
	var tests []string
	for _, m := range addedTestRE.FindAllStringSubmatch(string(b), -1) {
		tests = append(tests, m[1])
	}
	var pkgs []string
	for _, m := range changedFileRE.FindAllStringSubmatch(string(b), -1) {
		if strings.HasSuffix(m[1], "_test.go") {
			if pkg := "./" + pathDir(m[1]); !slices.Contains(pkgs, pkg) {
				pkgs = append(pkgs, pkg)
			}
		}
	}
	if len(tests) == 0 || len(pkgs) == 0 {
		return fmt.Errorf("adds no test")
	}
	tmp, err := os.MkdirTemp("", "gobgpfork-upstream-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := base.Extract(ctx, tmp, func(string) bool { return true }); err != nil {
		return err
	}
	abs, err := filepath.Abs(patch)
	if err != nil {
		return err
	}
	run := "^(" + strings.Join(tests, "|") + ")$"
	if msg, ok, err := gitApply(ctx, tmp, "apply", "--include=*_test.go", abs); err != nil || !ok {
		return fmt.Errorf("its tests do not apply: %v %s", err, msg)
	}
	fmt.Fprintf(out, "%s: its tests alone (they must fail): go test -run '%s' %s\n", filepath.Base(patch), run, strings.Join(pkgs, " "))
	if goTest(ctx, tmp, append([]string{"test", "-count=1", "-run", run}, pkgs...), io.Discard) == nil {
		return fmt.Errorf("its tests pass without the fix")
	}
	if msg, ok, err := gitApply(ctx, tmp, "apply", "--exclude=*_test.go", abs); err != nil || !ok {
		return fmt.Errorf("the fix does not apply: %v %s", err, msg)
	}
	args := append([]string{"test", fmt.Sprintf("-count=%d", count), "-run", run}, pkgs...)
	if err := goTest(ctx, tmp, args, out); err != nil {
		return fmt.Errorf("its tests fail with the fix")
	}
	return nil
}
