// CoreDNS with only the plugins a Kubernetes cluster's DNS uses (kubeadm's Corefile: errors,
// health, ready, kubernetes, forward, cache, loop, reload, loadbalance, plus log), instead of
// upstream's ~60 (cloud DNS back-ends among them), which would triple the build. This is
// CoreDNS's documented way to choose plugins at compile time: a main that imports coremain and
// the wanted plugins; their order comes from upstream's dnsserver.Directives, unchanged.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func main() {
	coremain.Run()
}
