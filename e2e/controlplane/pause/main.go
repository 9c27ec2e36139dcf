// The sandbox ("pause") container every Pod's containers join: it holds the Pod's namespaces
// open, reaps orphaned children (it is PID 1 when the Pod shares its process namespace), and
// exits on SIGINT/SIGTERM. Upstream's pause is a few lines of C doing exactly this; a static Go
// binary does the same without a C toolchain or a registry to pull registry.k8s.io/pause from.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
