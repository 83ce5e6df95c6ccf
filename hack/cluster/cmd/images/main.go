// Command images writes the cluster's container images as OCI archives for
// `ctr -n k8s.io images import`: pause.tar, tabby.tar, agnhost.tar and coredns.tar in -out.
//
//	go run ./hack/cluster/cmd/images -out DIR -tabby-bin bin -agnhost PATH -coredns PATH -tabby-tag TAG
//
// Run it from tabby's module (it builds the pause command); tabby's binaries come from
// `make build`. The chart's image.tag must be -tabby-tag.
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
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run() error {
	out := flag.String("out", "", "directory to write the archives to (created if missing)")
	tabbyBin := flag.String("tabby-bin", envOr("TABBY_BIN", "bin"), "directory of make build's binaries")
	agnhost := flag.String("agnhost", filepath.Join(cacheDir(), "bin", "agnhost"), "the static agnhost binary")
	coredns := flag.String("coredns", filepath.Join(cacheDir(), "bin", "coredns-"+images.CoreDNSVersion), "the static coredns binary")
	tag := flag.String("tabby-tag", "", "tag of the tabby image (default: git describe, as make build's VERSION)")
	only := flag.String("only", strings.Join(images.DefaultImages, ","), "comma-separated images to write")
	gz := flag.Bool("gzip", false, "compress the layers (smaller archives, slower to write and import)")
	flag.Parse()
	if *out == "" || flag.NArg() != 0 {
		flag.Usage()
		return fmt.Errorf("-out is required")
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

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// cacheDir is $TABBY_CACHE, by default ~/.cache/tabby, as in the Makefile.
func cacheDir() string {
	if d := os.Getenv("TABBY_CACHE"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "tabby")
}
