// CoreDNS for the real Nodes of tests/k8s (nodes.sh): only the plugins the
// test cluster's DNS needs, so that the build does not pull every cloud
// provider's SDK that CoreDNS's default plugin set brings. No forward plugin:
// names outside cluster.local get NXDOMAIN, nothing leaves the machine.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/template"
)

// The order in which the plugins of a server block run (CoreDNS's own
// order, restricted to the plugins above).
func init() {
	dnsserver.Directives = []string{
		"bind", "log", "health", "ready", "errors", "cache", "loadbalance", "template", "kubernetes",
	}
}

func main() { coremain.Run() }
