// Command kubectl is the upstream kubectl, built from k8s.io/kubectl at the version pinned in go.mod: the
// tests run the README's kubectl commands as a user would.
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
}
