// Command registry is the CNCF distribution registry (github.com/distribution/distribution/v3's
// cmd/registry), built here so that its version is pinned by this module's go.mod.
package main

import (
	// Basic authentication from an htpasswd file: the registry behind a login that pull secrets are
	// tested against.
	_ "github.com/distribution/distribution/v3/registry/auth/htpasswd"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"

	"github.com/distribution/distribution/v3/registry"
)

func main() {
	// The registry's own command line: `registry serve CONFIG.yml`.
	if err := registry.RootCmd.Execute(); err != nil {
		panic(err)
	}
}
