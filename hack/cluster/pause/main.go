// Command pause is the pod sandbox's process, as Kubernetes' pause: it holds the pod's
// namespaces by living, sleeps until SIGINT or SIGTERM and then exits 0, and, as PID 1 of a pod
// that shares its PID namespace, reaps the zombies its orphaned grandchildren leave.
//
// Built statically (CGO_ENABLED=0) into the registry.k8s.io/pause image the cluster's
// containerd uses as its sandbox image.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "-v" || os.Args[1] == "--version") {
		fmt.Println("pause (tabby)")
		return
	}
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "Warning: pause should be the first process")
	}
	// PID 1 ignores signals it has no handler for: without Notify, SIGTERM would not stop it.
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range sigs {
		if sig == syscall.SIGCHLD {
			reap()
			continue
		}
		fmt.Fprintf(os.Stderr, "Shutting down, got signal: %v\n", sig)
		os.Exit(0)
	}
}

// reap collects every exited child: signals coalesce, so one SIGCHLD may stand for several.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
	}
}
