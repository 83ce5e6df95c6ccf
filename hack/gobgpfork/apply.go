package gobgpfork

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// Outcome is how a patch applied.
type Outcome string

const (
	Clean    Outcome = "applies cleanly"
	Offset   Outcome = "applies with offset"
	Fuzz     Outcome = "applies with fuzz"
	Conflict Outcome = "CONFLICTS"
	// Upstream already has the change: the patch applies in reverse.
	Upstream Outcome = "already upstream (applies in reverse): drop it"
)

// PatchResult is how one patch of the series applied.
type PatchResult struct {
	Patch   string
	Outcome Outcome
	// Fuzz is the number of context lines that could not match (Fuzz only).
	Fuzz int
	// Notes are git's words for hunks that moved or were rejected ("file: hunk #2 rejected").
	Notes []string
}

func (r PatchResult) String() string {
	s := fmt.Sprintf("%-58s %s", r.Patch, r.Outcome)
	if r.Outcome == Fuzz {
		s += fmt.Sprintf(" %d", r.Fuzz)
	}
	for _, n := range r.Notes {
		s += "\n    " + n
	}
	return s
}

// Build writes upstream's kept files from src into dst and applies the series' first upto
// patches (all of them when upto is 0 or more than the series has). A patch that does not
// apply leaves what applied of it, its rejected hunks in .rej files beside their file, and the
// later patches are still tried. The error is errConflict when any patch conflicted.
func (f Fork) Build(ctx context.Context, src Source, dst string, upto int, report io.Writer) ([]PatchResult, error) {
	pkgs, err := f.Packages()
	if err != nil {
		return nil, err
	}
	patches, err := f.Patches()
	if err != nil {
		return nil, err
	}
	if upto > 0 && upto < len(patches) {
		patches = patches[:upto]
	}
	if err := src.Extract(ctx, dst, func(rel string) bool { return keptUpstreamFile(pkgs, rel) }); err != nil {
		return nil, err
	}
	return ApplySeries(ctx, dst, patches, report)
}

// ApplySeries applies patches in order to the tree in dir, reporting each outcome.
func ApplySeries(ctx context.Context, dir string, patches []string, report io.Writer) ([]PatchResult, error) {
	var results []PatchResult
	var failed error
	for _, p := range patches {
		r, err := applyPatch(ctx, dir, p)
		if err != nil {
			return results, err
		}
		if report != nil {
			fmt.Fprintln(report, r)
		}
		if r.Outcome == Conflict {
			failed = errConflict
		}
		results = append(results, r)
	}
	return results, failed
}

var (
	offsetRE   = regexp.MustCompile(`Hunk #(\d+) succeeded at (\d+) \(offset (-?\d+) lines?\)`)
	checkingRE = regexp.MustCompile(`^Checking patch (.+)\.\.\.$`)
	applyingRE = regexp.MustCompile(`^Applying patch (.+) with \d+ rejects?\.\.\.$`)
	rejectedRE = regexp.MustCompile(`^Rejected hunk #(\d+)\.$`)
	failedRE   = regexp.MustCompile(`^error: (.+)$`)
)

// applyPatch applies one patch with git apply: as it is, then with fewer lines of context
// (fuzz 1, then 2, as patch(1) allows), then what applies of it with the rest rejected.
func applyPatch(ctx context.Context, dir, patch string) (PatchResult, error) {
	abs, err := filepath.Abs(patch)
	if err != nil {
		return PatchResult{}, err
	}
	r := PatchResult{Patch: filepath.Base(patch)}
	for fuzz := 0; fuzz <= 2; fuzz++ {
		args := []string{"apply", "-v", "--whitespace=nowarn"}
		if fuzz > 0 {
			args = append(args, fmt.Sprintf("-C%d", 3-fuzz))
		}
		out, ok, err := gitApply(ctx, dir, append(args, abs)...)
		if err != nil {
			return r, err
		}
		if !ok {
			continue
		}
		r.Outcome, r.Fuzz = Clean, fuzz
		if fuzz > 0 {
			r.Outcome = Fuzz
		}
		file := ""
		for _, line := range strings.Split(out, "\n") {
			if m := checkingRE.FindStringSubmatch(line); m != nil {
				file = m[1]
			}
			if m := offsetRE.FindStringSubmatch(line); m != nil {
				if r.Outcome == Clean {
					r.Outcome = Offset
				}
				r.Notes = append(r.Notes, fmt.Sprintf("%s: hunk #%s at line %s (offset %s)", file, m[1], m[2], m[3]))
			}
		}
		return r, nil
	}
	if _, ok, err := gitApply(ctx, dir, "apply", "--check", "--reverse", "--whitespace=nowarn", abs); err != nil {
		return r, err
	} else if ok {
		r.Outcome = Upstream
		return r, nil
	}
	out, _, err := gitApply(ctx, dir, "apply", "-v", "--whitespace=nowarn", "--reject", "-C1", abs)
	if err != nil {
		return r, err
	}
	r.Outcome = Conflict
	file := ""
	for _, line := range strings.Split(out, "\n") {
		// git checks every file first, then applies them one by one and names the hunks
		// it rejected after the file.
		if m := applyingRE.FindStringSubmatch(line); m != nil {
			file = m[1]
		}
		if m := rejectedRE.FindStringSubmatch(line); m != nil {
			r.Notes = append(r.Notes, fmt.Sprintf("%s: hunk #%s rejected (%s.rej)", file, m[1], file))
		} else if m := failedRE.FindStringSubmatch(line); m != nil && !strings.HasPrefix(m[1], "while searching") && !strings.HasPrefix(m[1], "patch failed") {
			r.Notes = append(r.Notes, m[1])
		}
	}
	return r, nil
}

// gitApply runs git apply in dir, outside any repository, and returns its words and whether
// it applied.
func gitApply(ctx context.Context, dir string, args ...string) (string, bool, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", false, err
	}
	// Outside a repository git apply acts as patch(1); inside one it would take paths as the
	// repository's and leave out those outside the working directory without a word.
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = abs
	cmd.Env = append(os.Environ(), "GIT_CEILING_DIRECTORIES="+filepath.Dir(abs), "GIT_DIR="+filepath.Join(abs, ".no-git"))
	// git apply writes its words to standard error.
	out, err := cmd.CombinedOutput()
	if err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			return "", false, fmt.Errorf("git apply: %w", err)
		}
		return string(out), false, nil
	}
	return string(out), true, nil
}

// ApplyCommand builds the fork from src into out (a new temporary directory when empty) and
// reports, for each patch, how it applied; with into, the result then replaces
// third_party/gobgp's upstream files, rejected hunks (.rej files) included, for the conflicts
// to be resolved there.
func ApplyCommand(ctx context.Context, f Fork, src Source, upto int, out string, into bool, report io.Writer) error {
	desc, err := src.Describe(ctx)
	if err != nil {
		return err
	}
	built := false
	if out == "" {
		if out, err = os.MkdirTemp("", "gobgpfork-"); err != nil {
			return err
		}
		defer func() {
			if !built {
				os.RemoveAll(out)
			}
		}()
	} else if entries, err := os.ReadDir(out); err == nil && len(entries) > 0 {
		return fmt.Errorf("-out %s: not empty", out)
	}
	fmt.Fprintf(report, "the series on %s:\n", desc)
	results, buildErr := f.Build(ctx, src, out, upto, report)
	if buildErr != nil && !errors.Is(buildErr, errConflict) {
		return buildErr
	}
	// What was built stays, conflicts and all, for the engineer to read.
	built = true
	counts := map[Outcome]int{}
	for _, r := range results {
		counts[r.Outcome]++
	}
	fmt.Fprintf(report, "%d patches: %d clean, %d with offset, %d with fuzz, %d already upstream, %d conflicting; the result is in %s\n",
		len(results), counts[Clean], counts[Offset], counts[Fuzz], counts[Upstream], counts[Conflict], out)
	if into {
		if err := f.Into(out); err != nil {
			return err
		}
		fmt.Fprintf(report, "written into %s\n", f.Dir())
	}
	return buildErr
}
