// Command gobgpfork keeps tabby's GoBGP fork (third_party/gobgp) as upstream plus its series of
// patches (third_party/gobgp/TABBY.md: Updating GoBGP, Adding a change).
//
//	gobgpfork apply [-tag v4.9.0 | -git DIR [-rev REV]] [-upto N] [-out DIR | -into]
//	    build the fork from upstream and report how each patch applies
//	gobgpfork refresh [-tag v4.9.0 | -git DIR [-rev REV]] -out DIR [-resume N]
//	    rewrite the series for a new upstream version, stopping at a conflict for it to be resolved in DIR
//	gobgpfork series-test              each prefix of the series builds, vets and passes the tests its last patch touches
//	gobgpfork check                    the series on the base version is third_party/gobgp, byte for byte
//	gobgpfork new-patch -name NAME [-subject S] [-from REV]
//	    write the difference between the base version plus the series and third_party/gobgp as the next patch
//	gobgpfork upstream-tests [-all] [-work DIR] [-- go test flags]
//	    run upstream's tests of the kept packages against the fork
//	gobgpfork upstream-test-patch -name NNNN-name -work DIR
//	    write how upstream's tests in DIR were adapted as the next patch of upstream-tests/
//	gobgpfork upstream-patches [-count 3]
//	    apply each fix of third_party/gobgp/upstream to the full upstream tree and run its tests
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"github.com/tabbynet/tabby/hack/gobgpfork"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: gobgpfork apply|refresh|series-test|check|new-patch|upstream-tests|upstream-test-patch|upstream-patches [flags] (-h for each)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1], os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "gobgpfork:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cmd string, args []string) error {
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	root := fs.String("root", ".", "a directory in the tabby checkout")
	switch cmd {
	case "apply":
		tag := fs.String("tag", "", "upstream version from the Go module proxy (default: the base version, tabby's go.mod)")
		git := fs.String("git", "", "a git checkout (or bare mirror) of upstream, instead of -tag")
		rev := fs.String("rev", "HEAD", "the revision of -git")
		upto := fs.Int("upto", 0, "apply only the first N patches (0: all)")
		out := fs.String("out", "", "write the result here (default: a new temporary directory)")
		into := fs.Bool("into", false, "write the result into third_party/gobgp")
		_ = fs.Parse(args)
		f, err := fork(*root)
		if err != nil {
			return err
		}
		src := gobgpfork.Source{Version: *tag, Git: *git, Rev: *rev}
		if src.Git == "" && src.Version == "" {
			if src.Version, err = f.BaseVersion(); err != nil {
				return err
			}
		}
		return gobgpfork.ApplyCommand(ctx, f, src, *upto, *out, *into, os.Stdout)
	case "refresh":
		tag := fs.String("tag", "", "upstream version from the Go module proxy")
		git := fs.String("git", "", "a git checkout (or bare mirror) of upstream, instead of -tag")
		rev := fs.String("rev", "HEAD", "the revision of -git")
		out := fs.String("out", "", "where a conflict is left to be resolved")
		resume := fs.Int("resume", 0, "the patch whose conflicts were resolved in -out")
		_ = fs.Parse(args)
		if (*tag == "") == (*git == "") || *out == "" {
			return errors.New("refresh: -tag or -git, and -out, are required")
		}
		f, err := fork(*root)
		if err != nil {
			return err
		}
		return f.Refresh(ctx, gobgpfork.Source{Version: *tag, Git: *git, Rev: *rev}, *out, *resume, os.Stdout)
	case "series-test":
		_ = fs.Parse(args)
		f, err := fork(*root)
		if err != nil {
			return err
		}
		return f.TestSeries(ctx, os.Stdout)
	case "check":
		_ = fs.Parse(args)
		f, err := fork(*root)
		if err != nil {
			return err
		}
		return f.Check(ctx, os.Stdout)
	case "new-patch":
		name := fs.String("name", "", "the patch's name: lower-case words joined by dashes")
		subject := fs.String("subject", "", "the patch's first line (default: its name in words)")
		from := fs.String("from", "", "take the fork as this git revision of tabby has it (default: the working tree)")
		_ = fs.Parse(args)
		if *name == "" {
			return errors.New("new-patch: -name is required")
		}
		f, err := fork(*root)
		if err != nil {
			return err
		}
		if _, err := f.NewPatch(ctx, *name, *subject, *from, os.Stdout); err != nil {
			return err
		}
		if *from != "" {
			// The working tree may hold later changes still to be made patches.
			return nil
		}
		return f.Check(ctx, os.Stdout)
	case "upstream-patches":
		count := fs.Int("count", 3, "runs of each test with the fix")
		_ = fs.Parse(args)
		f, err := fork(*root)
		if err != nil {
			return err
		}
		return f.CheckUpstreamPatches(ctx, *count, os.Stdout)
	case "upstream-tests":
		all := fs.Bool("all", false, "run the slow tests too")
		work := fs.String("work", "", "build the tree of the fork and upstream's tests here, and keep it")
		_ = fs.Parse(args)
		f, err := fork(*root)
		if err != nil {
			return err
		}
		return f.UpstreamTests(ctx, *all, *work, fs.Args(), os.Stdout)
	case "upstream-test-patch":
		name := fs.String("name", "", "the fork's patch the tests are adapted to, without .patch")
		work := fs.String("work", "", "the tree upstream-tests -work made, its tests edited")
		_ = fs.Parse(args)
		if *name == "" || *work == "" {
			return errors.New("upstream-test-patch: -name and -work are required")
		}
		f, err := fork(*root)
		if err != nil {
			return err
		}
		_, err = f.NewTestPatch(ctx, *name, *work, os.Stdout)
		return err
	}
	return fmt.Errorf("unknown command %q", cmd)
}

func fork(dir string) (gobgpfork.Fork, error) {
	root, err := gobgpfork.FindRoot(dir)
	return gobgpfork.Fork{Root: root}, err
}
