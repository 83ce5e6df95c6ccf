package gobgpfork

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Check says whether the series, applied to the base version, reproduces the fork byte for
// byte, and whether the list of kept packages is the one tabby links.
func (f Fork) Check(ctx context.Context, report io.Writer) error {
	if f.Base == nil {
		if err := f.CheckPackages(ctx); err != nil {
			return err
		}
	}
	base, err := f.base()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "gobgpfork-check-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	results, err := f.Build(ctx, base, tmp, 0, report)
	if err != nil {
		return fmt.Errorf("the series on %s: %w", base, err)
	}
	for _, r := range results {
		if r.Outcome != Clean {
			return fmt.Errorf("the series on %s: %s %s: refresh it (TABBY.md: Adding a change)", base, r.Patch, r.Outcome)
		}
	}
	diffs, err := Compare(tmp, f.Dir())
	if err != nil {
		return err
	}
	if len(diffs) > 0 {
		return fmt.Errorf("%s plus the series (%d patches) is not third_party/gobgp:\n  %s\nturn a change to the fork into a patch with `make gobgp-new-patch NAME=...` (TABBY.md: Adding a change)",
			base, len(results), strings.Join(diffs, "\n  "))
	}
	fmt.Fprintf(report, "third_party/gobgp is %s plus %d patches, byte for byte\n", base, len(results))
	return nil
}

// CheckPackages says whether patches/packages lists exactly the GoBGP packages tabby links,
// its tests included.
func (f Fork) CheckPackages(ctx context.Context) error {
	listed, err := f.Packages()
	if err != nil {
		return err
	}
	linked, err := f.LinkedPackages(ctx)
	if err != nil {
		return err
	}
	if !slices.Equal(listed, linked) {
		return fmt.Errorf("patches/packages lists %v, tabby links %v: update the list (one directory a line) and the fork's files", listed, linked)
	}
	return nil
}

// LinkedPackages are the GoBGP packages tabby's main module links, its tests included, as
// directories relative to upstream's module root.
func (f Fork) LinkedPackages(ctx context.Context) ([]string, error) {
	out, err := run(ctx, f.Root, nil, "go", "list", "-deps", "-test", "-f", "{{.ImportPath}}", "./...")
	if err != nil {
		return nil, err
	}
	var pkgs []string
	for _, line := range strings.Split(out, "\n") {
		path, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		if rel, ok := strings.CutPrefix(path, Module+"/"); ok && !slices.Contains(pkgs, rel) {
			pkgs = append(pkgs, rel)
		}
	}
	slices.Sort(pkgs)
	return pkgs, nil
}

var patchNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// NewPatch writes the difference between the base version plus the series and the fork's tree
// as the series' next patch, named name, and returns its path. The tree is the working tree's,
// or, with from set, the fork as that git revision of tabby has it (the series stays the
// working tree's): after several merges, one patch per merge. Nothing is written when there is
// no difference, or when the series does not apply cleanly to the base version.
func (f Fork) NewPatch(ctx context.Context, name, subject, from string, report io.Writer) (string, error) {
	if !patchNameRE.MatchString(name) {
		return "", fmt.Errorf("patch name %q: lower-case letters, digits and dashes (e.g. bfd-echo-mode)", name)
	}
	base, err := f.base()
	if err != nil {
		return "", err
	}
	patches, err := f.Patches()
	if err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp("", "gobgpfork-new-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	a, b := filepath.Join(tmp, "a"), filepath.Join(tmp, "b")
	results, err := f.Build(ctx, base, a, 0, io.Discard)
	if err != nil {
		return "", fmt.Errorf("the series on %s: %w", base, err)
	}
	for _, r := range results {
		if r.Outcome != Clean {
			return "", fmt.Errorf("the series on %s: %s %s: the series must apply cleanly before a patch is added", base, r.Patch, r.Outcome)
		}
	}
	if from == "" {
		err = copyTree(f.Dir(), b)
	} else {
		err = Source{Git: f.Root, Rev: from}.extractUnder(ctx, "third_party/gobgp", b)
	}
	if err != nil {
		return "", err
	}
	diff, err := Diff(ctx, tmp, "a", "b")
	if err != nil {
		return "", err
	}
	if len(diff) == 0 {
		return "", errors.New("third_party/gobgp is already the base version plus the series: no change to make a patch of")
	}
	if subject == "" {
		subject = strings.ReplaceAll(name, "-", " ")
	}
	path := filepath.Join(f.PatchDir(), fmt.Sprintf("%04d-%s.patch", len(patches)+1, name))
	header := fmt.Sprintf("%s\n\ntabby's change to GoBGP: what, why and its test are in TABBY.md.\n\n", subject)
	if err := os.WriteFile(path, append([]byte(header), diff...), 0o644); err != nil {
		return "", err
	}
	fmt.Fprintf(report, "wrote %s (%d lines)\n", path, bytes.Count(diff, []byte("\n")))
	return path, nil
}

// Diff is the unified diff (git's format, paths a/... and b/... relative to the module root)
// from tree a to tree b, both directories of dir.
func Diff(ctx context.Context, dir, a, b string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", "-c", "core.quotePath=false", "-c", "diff.noprefix=false",
		"diff", "--no-index", "--no-prefix", "--no-color", "--no-ext-diff", "--no-renames", "-U3", a, b)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CEILING_DIRECTORIES="+filepath.Dir(dir))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 1 {
		err = nil // differences
	}
	if err != nil {
		return nil, fmt.Errorf("git diff --no-index: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return normalizeHeaders(stdout.Bytes()), nil
}

// normalizeHeaders names both sides a/path and b/path on every "diff --git" line, as git diff
// in a repository does: without an index, git names a new file b/path on both sides, and a
// deleted one a/path.
func normalizeHeaders(diff []byte) []byte {
	lines := strings.SplitAfter(string(diff), "\n")
	for i, l := range lines {
		rest, ok := strings.CutPrefix(l, "diff --git ")
		if !ok {
			continue
		}
		rest = strings.TrimSuffix(rest, "\n")
		if half := len(rest) / 2; len(rest)%2 == 1 && rest[half] == ' ' && rest[2:half] == rest[half+3:] {
			lines[i] = "diff --git a/" + rest[2:half] + " b/" + rest[half+3:] + "\n"
		}
	}
	return []byte(strings.Join(lines, ""))
}

// Into replaces the fork's upstream files (everything but TABBY.md, patches/ and upstream/)
// with the tree in dir.
func (f Fork) Into(dir string) error {
	old, err := treeFiles(f.Dir())
	if err != nil {
		return err
	}
	for _, rel := range old {
		if err := os.Remove(filepath.Join(f.Dir(), rel)); err != nil {
			return err
		}
	}
	return copyTree(dir, f.Dir())
}

// Refresh rewrites the series for src (a new upstream version): each patch is applied in turn
// and written again as the exact difference it makes there, so that the series applies cleanly
// to src. A patch that conflicts stops it: the tree before that patch, with what applied of it
// and its rejected hunks (.rej), is left in work for the conflicts to be resolved; Refresh with
// resume set to that patch's number then takes work as the patch's result and goes on.
func (f Fork) Refresh(ctx context.Context, src Source, work string, resume int, report io.Writer) error {
	pkgs, err := f.Packages()
	if err != nil {
		return err
	}
	patches, err := f.Patches()
	if err != nil {
		return err
	}
	if resume < 0 || resume > len(patches) {
		return fmt.Errorf("-resume %d: the series has patches 1 to %d", resume, len(patches))
	}
	tmp, err := os.MkdirTemp("", "gobgpfork-refresh-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	prev, cur := filepath.Join(tmp, "a"), filepath.Join(tmp, "b")
	if err := src.Extract(ctx, cur, func(rel string) bool { return keptUpstreamFile(pkgs, rel) }); err != nil {
		return err
	}
	for i, p := range patches {
		n := i + 1
		if err := os.RemoveAll(prev); err != nil {
			return err
		}
		if err := copyTree(cur, prev); err != nil {
			return err
		}
		if n == resume {
			if err := os.RemoveAll(cur); err != nil {
				return err
			}
			if err := copyResolved(work, cur); err != nil {
				return err
			}
		} else {
			r, err := applyPatch(ctx, cur, p)
			if err != nil {
				return err
			}
			fmt.Fprintln(report, r)
			if r.Outcome == Conflict {
				if err := os.RemoveAll(work); err != nil {
					return err
				}
				if err := copyTree(cur, work); err != nil {
					return err
				}
				return fmt.Errorf("%s conflicts: resolve it in %s (the .rej files: apply each by hand, then delete it), then run the same command with RESUME=%d OUT=%s", r.Patch, work, n, work)
			}
		}
		diff, err := Diff(ctx, tmp, "a", "b")
		if err != nil {
			return err
		}
		if len(diff) == 0 {
			fmt.Fprintf(report, "%s: changes nothing on %s (upstream has it?): delete it and its section, and renumber the later ones\n", filepath.Base(p), src)
		}
		old, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		header := old
		if i := bytes.Index(old, []byte("diff --git ")); i >= 0 {
			header = old[:i]
		}
		if !bytes.Equal(old, append(header[:len(header):len(header)], diff...)) {
			if err := os.WriteFile(p, append(header, diff...), 0o644); err != nil {
				return err
			}
			fmt.Fprintf(report, "    rewritten for %s\n", src)
		}
	}
	return nil
}

// copyResolved copies a tree whose conflicts were resolved, without what git apply left.
func copyResolved(src, dst string) error {
	files, err := treeFiles(src)
	if err != nil {
		return err
	}
	for _, rel := range files {
		if strings.HasSuffix(rel, ".rej") || strings.HasSuffix(rel, ".orig") {
			return fmt.Errorf("%s: %s is still there: apply its hunks by hand and delete it", src, rel)
		}
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

// TestSeries builds the base version plus each prefix of the series in turn and, for each, runs
// go vet on the whole module and the tests of the packages whose tests the last patch adds or
// changes: every patch builds and passes its own tests on the ones before it.
func (f Fork) TestSeries(ctx context.Context, report io.Writer) error {
	base, err := f.base()
	if err != nil {
		return err
	}
	patches, err := f.Patches()
	if err != nil {
		return err
	}
	var failed []string
	for n := 1; n <= len(patches); n++ {
		name := filepath.Base(patches[n-1])
		tmp, err := os.MkdirTemp("", "gobgpfork-series-")
		if err != nil {
			return err
		}
		err = f.testPrefix(ctx, base, tmp, n, patches[n-1], report)
		os.RemoveAll(tmp)
		if err != nil {
			fmt.Fprintf(report, "%s: %v\n", name, err)
			failed = append(failed, name)
			continue
		}
		fmt.Fprintf(report, "%s: builds, vets and passes its tests\n", name)
	}
	if len(failed) > 0 {
		return fmt.Errorf("the series: %s", strings.Join(failed, ", "))
	}
	return nil
}

func (f Fork) testPrefix(ctx context.Context, base Source, dir string, n int, patch string, report io.Writer) error {
	results, err := f.Build(ctx, base, dir, n, io.Discard)
	if err != nil {
		return err
	}
	if r := results[len(results)-1]; r.Outcome != Clean {
		return fmt.Errorf("%s", r.Outcome)
	}
	if _, err := run(ctx, dir, nil, "go", "vet", "./..."); err != nil {
		return err
	}
	b, err := os.ReadFile(patch)
	if err != nil {
		return err
	}
	var pkgs []string
	for _, m := range changedFileRE.FindAllStringSubmatch(string(b), -1) {
		if strings.HasSuffix(m[1], "_test.go") {
			if pkg := "./" + pathDir(m[1]); !slices.Contains(pkgs, pkg) {
				pkgs = append(pkgs, pkg)
			}
		}
	}
	if len(pkgs) == 0 {
		return nil
	}
	return goTest(ctx, dir, append([]string{"test", "-count=1"}, pkgs...), report)
}
