package gobgpfork

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Source is a version of upstream GoBGP: a tag (or any version) of the Go module proxy, or a
// revision of a git checkout of upstream's repository (a bare mirror will do) for code not
// released yet.
type Source struct {
	// Version is a module version, as `go mod download` takes it (v4.8.0).
	Version string
	// Git is a git checkout of upstream; Rev its revision (default HEAD).
	Git, Rev string
}

func (s Source) String() string {
	if s.Git != "" {
		return fmt.Sprintf("%s at %s", s.Git, s.rev())
	}
	return Module + "@" + s.Version
}

func (s Source) rev() string {
	if s.Rev == "" {
		return "HEAD"
	}
	return s.Rev
}

// Describe names the source's exact code: the module version, or the git commit and its date.
func (s Source) Describe(ctx context.Context) (string, error) {
	if s.Git == "" {
		return Module + "@" + s.Version + " (Go module proxy)", nil
	}
	out, err := run(ctx, "", nil, "git", "-C", s.Git, "log", "-1", "--format=%H %cI %s", s.rev(), "--")
	if err != nil {
		return "", err
	}
	return "upstream commit " + strings.TrimSpace(out), nil
}

// Extract writes the files of the source that keep says to keep (slash-separated paths
// relative to upstream's module root) into dst.
func (s Source) Extract(ctx context.Context, dst string, keep func(rel string) bool) error {
	if s.Git != "" {
		return s.extractGit(ctx, dst, keep)
	}
	return s.extractModule(ctx, dst, keep)
}

func (s Source) extractModule(ctx context.Context, dst string, keep func(string) bool) error {
	if s.Version == "" {
		return errors.New("upstream source: a version (tag) or a git checkout is needed")
	}
	// Outside any module: a module's replace of GoBGP (tabby's own) must not answer.
	out, err := run(ctx, os.TempDir(), []string{"GOFLAGS=-mod=mod", "GOWORK=off"}, "go", "mod", "download", "-json", Module+"@"+s.Version)
	var info struct{ Dir, Error string }
	if jsonErr := json.Unmarshal([]byte(out), &info); err == nil && jsonErr != nil {
		err = jsonErr
	}
	if info.Error != "" {
		return fmt.Errorf("-tag %s: %s", s.Version, info.Error)
	}
	if err != nil {
		return fmt.Errorf("downloading %s@%s: %w", Module, s.Version, err)
	}
	if info.Error != "" || info.Dir == "" {
		return fmt.Errorf("go mod download %s@%s: %s", Module, s.Version, info.Error)
	}
	return filepath.WalkDir(info.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(info.Dir, p)
		if err != nil {
			return err
		}
		if rel = filepath.ToSlash(rel); !keep(rel) {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return writeFile(filepath.Join(dst, rel), b)
	})
}

// extractUnder writes the files under dir of the git revision (the fork's own files left out)
// into dst, relative to dir.
func (s Source) extractUnder(ctx context.Context, dir, dst string) error {
	prefix := strings.TrimSuffix(dir, "/") + "/"
	var found bool
	err := s.extractGitPaths(ctx, []string{dir}, func(name string) (string, bool) {
		rel, ok := strings.CutPrefix(name, prefix)
		found = found || ok
		return rel, ok && !isMeta(rel)
	}, dst)
	if err == nil && !found {
		err = fmt.Errorf("%s has no %s", s, dir)
	}
	return err
}

func (s Source) extractGit(ctx context.Context, dst string, keep func(string) bool) error {
	return s.extractGitPaths(ctx, nil, func(name string) (string, bool) { return name, keep(name) }, dst)
}

// extractGitPaths writes the files of the revision under paths (all when none) that name
// keeps, at the path it returns, into dst.
func (s Source) extractGitPaths(ctx context.Context, paths []string, name func(string) (string, bool), dst string) error {
	args := append([]string{"-C", s.Git, "archive", "--format=tar", s.rev()}, paths...)
	cmd := exec.CommandContext(ctx, "git", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	tr := tar.NewReader(out)
	var extractErr error
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			extractErr = err
			break
		}
		rel, ok := name(h.Name)
		if h.Typeflag != tar.TypeReg || !ok {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			extractErr = err
			break
		}
		if err := writeFile(filepath.Join(dst, filepath.FromSlash(rel)), b); err != nil {
			extractErr = err
			break
		}
	}
	_, _ = io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("git archive %s of %s: %w: %s", s.rev(), s.Git, err, strings.TrimSpace(stderr.String()))
	}
	return extractErr
}

// run runs a command in dir and returns its standard output; an error carries its standard
// error.
func run(ctx context.Context, dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}
