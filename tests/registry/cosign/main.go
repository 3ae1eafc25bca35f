// The cosign CLI, built from its Go module at the version pinned in go.mod: the tests sign checks with the
// tool users sign with (key pairs, image signatures in a registry, detached blob signatures), so that
// preflight's verification is proven against signatures nobody here produced.
package main

import (
	"os"

	"github.com/sigstore/cosign/v2/cmd/cosign/cli"
)

func main() {
	if err := cli.New().Execute(); err != nil {
		os.Exit(1)
	}
}
