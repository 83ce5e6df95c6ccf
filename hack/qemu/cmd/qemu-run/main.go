// Command qemu-run boots the tabby test guest and runs a script in it (see hack/qemu/run.sh).
package main

import (
	"os"

	"github.com/tabbynet/tabby/hack/qemu"
)

func main() {
	os.Exit(qemu.Main(os.Args[1:], os.Stdout, os.Stderr))
}
