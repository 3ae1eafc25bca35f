// Command oras is the ORAS CLI (oras.land/oras's cmd/oras), built here so that its version is pinned by
// this module's go.mod: a client nobody in this project wrote, for the interoperability tests.
package main

import "oras.land/oras/cmd/oras/root"

func main() {
	if err := root.New().Execute(); err != nil {
		panic(err)
	}
}
