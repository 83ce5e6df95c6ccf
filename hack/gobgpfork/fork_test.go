package gobgpfork

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// upstreamRepo makes a git repository standing for upstream: a module with a kept package
// (pkg/a, its test too), a package the fork leaves out (pkg/b) and a README.
func upstreamRepo(t *testing.T) (dir string, commit func(files map[string]string)) {
	t.Helper()
	dir = t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	git("init", "-q")
	commit = func(files map[string]string) {
		t.Helper()
		for rel, content := range files {
			if err := writeFile(filepath.Join(dir, rel), []byte(content)); err != nil {
				t.Fatal(err)
			}
		}
		git("add", "-A")
		git("commit", "-q", "--allow-empty", "-m", "c")
	}
	commit(map[string]string{
		"go.mod":          "module " + Module + "\n",
		"go.sum":          "",
		"LICENSE":         "license\n",
		"README.md":       "upstream\n",
		"pkg/a/a.go":      numbered("a", 1, 30),
		"pkg/a/a_test.go": "package a\n",
		"pkg/b/b.go":      "package b\n",
	})
	return dir, commit
}

// numbered is lines "prefix N" for N in [from, to].
func numbered(prefix string, from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&b, "%s %d\n", prefix, i)
	}
	return b.String()
}

// forkOf makes a tabby checkout whose fork keeps pkg/a of upstream.
func forkOf(t *testing.T, upstream string) Fork {
	t.Helper()
	root := t.TempDir()
	for rel, content := range map[string]string{
		"go.mod":                             "module example.com/tabby\n\nrequire " + Module + " v4.8.0\n",
		"third_party/gobgp/TABBY.md":         "# fork\n",
		"third_party/gobgp/patches/packages": "# kept\npkg/a\n",
	} {
		if err := writeFile(filepath.Join(root, rel), []byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	return Fork{Root: root, Base: &Source{Git: upstream}}
}

// A change committed to the fork becomes the next patch; the series then reproduces the fork,
// and a change not made a patch fails the check.
func TestNewPatchAndCheck(t *testing.T) {
	ctx := context.Background()
	up, _ := upstreamRepo(t)
	f := forkOf(t, up)
	if err := f.Base.Extract(ctx, f.Dir(), func(rel string) bool { return keptUpstreamFile([]string{"pkg/a"}, rel) }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(f.Dir(), "pkg/b/b.go")); err == nil {
		t.Fatal("a package the fork does not keep was extracted")
	}
	if err := f.Check(ctx, io.Discard); err != nil {
		t.Fatalf("the bare base: %v", err)
	}
	if _, err := f.NewPatch(ctx, "nothing", "", "", io.Discard); err == nil {
		t.Fatal("a patch of no change was written")
	}

	a := filepath.Join(f.Dir(), "pkg/a/a.go")
	if err := os.WriteFile(a, []byte(strings.Replace(numbered("a", 1, 30), "a 10\n", "a ten\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(filepath.Join(f.Dir(), "pkg/a/tabby_a_test.go"), []byte("package a\n")); err != nil {
		t.Fatal(err)
	}
	if err := f.Check(ctx, io.Discard); err == nil || !strings.Contains(err.Error(), "differs: pkg/a/a.go") || !strings.Contains(err.Error(), "only in the fork: pkg/a/tabby_a_test.go") {
		t.Fatalf("check of a change not in the series: %v", err)
	}
	if _, err := f.NewPatch(ctx, "Bad Name", "", "", io.Discard); err == nil {
		t.Fatal("a patch named with spaces and capitals was written")
	}
	path, err := f.NewPatch(ctx, "ten", "Ten in words", "", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(path) != "0001-ten.patch" {
		t.Fatalf("patch written as %s", path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Ten in words\n", "diff --git a/pkg/a/a.go b/pkg/a/a.go\n", "diff --git a/pkg/a/tabby_a_test.go b/pkg/a/tabby_a_test.go\n", "-a 10\n+a ten\n"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("patch lacks %q:\n%s", want, b)
		}
	}
	if err := f.Check(ctx, io.Discard); err != nil {
		t.Fatalf("check after the patch: %v", err)
	}
	// A second change is the second patch, on top of the first.
	if err := os.WriteFile(a, []byte(strings.Replace(numbered("a", 1, 30), "a 10\n", "a TEN\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if path, err = f.NewPatch(ctx, "ten-louder", "", "", io.Discard); err != nil || filepath.Base(path) != "0002-ten-louder.patch" {
		t.Fatalf("second patch: %s, %v", path, err)
	}
	if err := f.Check(ctx, io.Discard); err != nil {
		t.Fatalf("check after the second patch: %v", err)
	}
}

// On a newer upstream a patch applies cleanly, with offset, with fuzz or conflicts, and says
// so; refresh rewrites the series for it, and stops at a conflict until it is resolved.
func TestApplyOutcomesAndRefresh(t *testing.T) {
	ctx := context.Background()
	up, commit := upstreamRepo(t)
	f := forkOf(t, up)
	patch := "Ten\n\n" + `diff --git a/pkg/a/a.go b/pkg/a/a.go
--- a/pkg/a/a.go
+++ b/pkg/a/a.go
@@ -7,7 +7,7 @@
 a 7
 a 8
 a 9
-a 10
+a ten
 a 11
 a 12
 a 13
`
	if err := writeFile(filepath.Join(f.PatchDir(), "0001-ten.patch"), []byte(patch)); err != nil {
		t.Fatal(err)
	}
	outcome := func(files map[string]string) PatchResult {
		t.Helper()
		commit(files)
		results, err := f.Build(ctx, Source{Git: up}, t.TempDir(), 0, io.Discard)
		if err != nil && err != errConflict {
			t.Fatal(err)
		}
		if len(results) != 1 {
			t.Fatalf("%d results", len(results))
		}
		return results[0]
	}
	if r := outcome(nil); r.Outcome != Clean {
		t.Fatalf("on its base: %v", r)
	}
	if r := outcome(map[string]string{"pkg/a/a.go": "new\nnew\n" + numbered("a", 1, 30)}); r.Outcome != Offset || !strings.Contains(r.String(), "offset 2") {
		t.Fatalf("two lines added above: %v", r)
	}
	if r := outcome(map[string]string{"pkg/a/a.go": strings.Replace(numbered("a", 1, 30), "a 7\n", "a seven\n", 1)}); r.Outcome != Fuzz || r.Fuzz != 1 {
		t.Fatalf("the first line of context changed: %v", r)
	}
	if r := outcome(map[string]string{"pkg/a/a.go": strings.Replace(numbered("a", 1, 30), "a 10\n", "a ten\n", 1)}); r.Outcome != Upstream {
		t.Fatalf("upstream made the change: %v", r)
	}
	conflicting := map[string]string{"pkg/a/a.go": strings.Replace(numbered("a", 1, 30), "a 10\n", "a dix\n", 1)}
	if r := outcome(conflicting); r.Outcome != Conflict || !strings.Contains(r.String(), "pkg/a/a.go: hunk #1 rejected") {
		t.Fatalf("the changed line changed upstream: %v", r)
	}

	work := filepath.Join(t.TempDir(), "work")
	err := f.Refresh(ctx, Source{Git: up}, work, 0, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "RESUME=1") {
		t.Fatalf("refresh over a conflict: %v", err)
	}
	if _, err := os.Stat(filepath.Join(work, "pkg/a/a.go.rej")); err != nil {
		t.Fatalf("no rejected hunk left to resolve: %v", err)
	}
	if err := f.Refresh(ctx, Source{Git: up}, work, 1, io.Discard); err == nil {
		t.Fatal("refresh took a tree with a .rej file as resolved")
	}
	os.Remove(filepath.Join(work, "pkg/a/a.go.rej"))
	if err := os.WriteFile(filepath.Join(work, "pkg/a/a.go"), []byte(strings.Replace(numbered("a", 1, 30), "a 10\n", "a ten\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.Refresh(ctx, Source{Git: up}, work, 1, io.Discard); err != nil {
		t.Fatal(err)
	}
	if r := outcome(nil); r.Outcome != Clean {
		t.Fatalf("the refreshed patch: %v", r)
	}
	b, err := os.ReadFile(filepath.Join(f.PatchDir(), "0001-ten.patch"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "Ten\n\ndiff --git a/pkg/a/a.go b/pkg/a/a.go\n") || !strings.Contains(string(b), "-a dix\n+a ten\n") {
		t.Fatalf("refreshed patch:\n%s", b)
	}
}

// After merges, each merge's change becomes its own patch: new-patch takes the fork as a commit
// has it, and the series keeps growing in the working tree.
func TestNewPatchFromCommits(t *testing.T) {
	ctx := context.Background()
	up, _ := upstreamRepo(t)
	f := forkOf(t, up)
	if err := f.Base.Extract(ctx, f.Dir(), func(rel string) bool { return keptUpstreamFile([]string{"pkg/a"}, rel) }); err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", f.Root, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	a := filepath.Join(f.Dir(), "pkg/a/a.go")
	change := func(from, to string) string {
		t.Helper()
		b, err := os.ReadFile(a)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(a, []byte(strings.Replace(string(b), from, to, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		git("commit", "-qam", to)
		return git("rev-parse", "HEAD")
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-qm", "base")
	first := change("a 5\n", "a five\n")
	second := change("a 25\n", "a twenty-five\n")

	if _, err := f.NewPatch(ctx, "five", "", first, io.Discard); err != nil {
		t.Fatal(err)
	}
	if _, err := f.NewPatch(ctx, "twenty-five", "", second, io.Discard); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"0001-five.patch": "+a five\n", "0002-twenty-five.patch": "+a twenty-five\n"} {
		b, err := os.ReadFile(filepath.Join(f.PatchDir(), name))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), want) || strings.Count(string(b), "\n+a ") != 1 {
			t.Errorf("%s holds more or less than its change:\n%s", name, b)
		}
	}
	if err := f.Check(ctx, io.Discard); err != nil {
		t.Fatal(err)
	}
}

// An upstream test adapted to a fork change becomes a patch of upstream-tests/, and the next
// tree of upstream's tests has it.
func TestNewTestPatch(t *testing.T) {
	ctx := context.Background()
	up, _ := upstreamRepo(t)
	f := forkOf(t, up)
	if err := f.Base.Extract(ctx, f.Dir(), func(rel string) bool { return keptUpstreamFile([]string{"pkg/a"}, rel) }); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(filepath.Join(f.Dir(), "pkg/a/tabby_a_test.go"), []byte("package a\n")); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	if _, err := f.testsTree(ctx, work, io.Discard); err != nil {
		t.Fatal(err)
	}
	test := filepath.Join(work, "pkg/a/a_test.go")
	if b, err := os.ReadFile(test); err != nil || string(b) != "package a\n" {
		t.Fatalf("upstream's test in the tree: %q, %v", b, err)
	}
	if _, err := f.NewTestPatch(ctx, "0001-ten", work, io.Discard); err == nil {
		t.Fatal("a test patch of no change was written")
	}
	if err := os.WriteFile(test, []byte("package a\n\n// adapted\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "pkg/a/tabby_a_test.go"), []byte("package a\n// not upstream's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	path, err := f.NewTestPatch(ctx, "0001-ten", work, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "+// adapted\n") || strings.Contains(string(b), "tabby_a_test.go") {
		t.Fatalf("test patch:\n%s", b)
	}
	again := t.TempDir()
	if _, err := f.testsTree(ctx, again, io.Discard); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(again, "pkg/a/a_test.go")); err != nil || !strings.Contains(string(b), "// adapted") {
		t.Fatalf("the next tree's test: %q, %v", b, err)
	}
}
