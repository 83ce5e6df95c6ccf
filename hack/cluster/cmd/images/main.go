// Command images writes the cluster's container images as OCI archives for
// `ctr -n k8s.io images import`: pause.tar, tabby.tar, agnhost.tar and coredns.tar in -out.
//
//	go run -C hack ./cluster/cmd/images -out DIR -agnhost PATH -coredns PATH -tabby-tag TAG
//
// Run it from the lab's module, hack/ (it builds the pause command); tabby's binaries come from
// `make build` (<repo>/bin unless -tabby-bin or TABBY_BIN says otherwise). The chart's image.tag must be -tabby-tag.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/tabbynet/tabby/hack/cluster/images"
	"github.com/tabbynet/tabby/hack/lab"
	"github.com/tabbynet/tabby/internal/testenv"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run() error {
	out := flag.String("out", "", "directory to write the archives to (created if missing)")
	tabbyBin := flag.String("tabby-bin", os.Getenv("TABBY_BIN"), "directory of make build's binaries (default <repo>/bin)")
	agnhost := flag.String("agnhost", filepath.Join(testenv.BinDir(), "agnhost"), "the static agnhost binary")
	coredns := flag.String("coredns", filepath.Join(testenv.BinDir(), "coredns-"+images.CoreDNSVersion), "the static coredns binary")
	tag := flag.String("tabby-tag", "", "tag of the tabby image (default: git describe, as make build's VERSION)")
	only := flag.String("only", strings.Join(images.DefaultImages, ","), "comma-separated images to write")
	gz := flag.Bool("gzip", false, "compress the layers (smaller archives, slower to write and import)")
	flag.Parse()
	if *out == "" || flag.NArg() != 0 {
		flag.Usage()
		return fmt.Errorf("-out is required")
	}
	if *tabbyBin == "" {
		repo, err := lab.FindRepo()
		if err != nil {
			return fmt.Errorf("-tabby-bin not given: %w", err)
		}
		*tabbyBin = filepath.Join(repo, "bin")
	}
	if *tag == "" {
		v, err := exec.Command("git", "describe", "--tags", "--always", "--dirty").Output()
		if err != nil {
			return fmt.Errorf("-tabby-tag not given and git describe failed: %w", err)
		}
		*tag = strings.TrimSpace(string(v))
	}
	archives, err := images.WriteArchives(context.Background(), images.Options{
		Dir: *out, TabbyBin: *tabbyBin, TabbyTag: *tag, Agnhost: *agnhost, CoreDNS: *coredns,
		Only: strings.Split(*only, ","), Gzip: *gz,
		Warn: func(msg string) { fmt.Fprintln(os.Stderr, "images: warning:", msg) },
	})
	if err != nil {
		return err
	}
	for _, a := range archives {
		fmt.Printf("%s\t%s\t%.1f MB\n", a.Ref, a.Path, float64(a.Size)/1e6)
	}
	return nil
}
