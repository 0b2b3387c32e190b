// Command coredns is CoreDNS, built from github.com/coredns/coredns at the version
// pinned in this module, with only the plugins the local run's real nodes use: the
// cluster's Services and Pods answered from the API server (kubernetes), and what a
// Corefile around it needs (errors, log, health, ready, cache). Nothing is
// forwarded: the machine has no upstream DNS to forward to.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

// directives are the plugins compiled in, in CoreDNS's own order (core/dnsserver).
var directives = []string{"errors", "log", "health", "ready", "cache", "kubernetes"}

func init() {
	dnsserver.Directives = directives
}

func main() {
	coremain.Run()
}
