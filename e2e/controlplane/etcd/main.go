// Command etcd is etcd's own server entry point, built from the go.etcd.io/etcd/server/v3
// module at the version pinned in go.mod. Spindle builds it from Go modules because the
// machines it runs on reach the Go module proxy but no release download site.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
