// Command kube-controller-manager is the upstream controller manager, built from k8s.io/kubernetes at the
// version pinned in go.mod. The test control plane runs only the controllers its tests race against.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
