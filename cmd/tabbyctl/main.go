// Command tabbyctl manages tabby: see package tabbyctl.
package main

import (
	"os"

	"github.com/tabbynet/tabby/tabbyctl"
)

func main() {
	os.Exit(tabbyctl.Main(os.Args[1:], tabbyctl.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}))
}
