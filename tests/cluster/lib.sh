# Shared settings of the control-plane scripts. Sourced, not run.
# Everything lives outside the repository: binaries are cached per version, a running cluster keeps its
# certificates, data, ports, pids and kubeconfig in one state directory.

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${PREFLIGHT_CACHE:-$HOME/.cache/preflight}
state=${PREFLIGHT_CLUSTER_DIR:-$cache/cluster}
bin_dir=$cache/bin

# Versions come from go.mod, the single place they are pinned.
kube_version=$(awk '$1 == "k8s.io/kubernetes" { print $2 }' "$here/go.mod")
etcd_version=$(awk '$1 == "go.etcd.io/etcd/server/v3" { print $2 }' "$here/go.mod")
apiserver_bin=$bin_dir/kube-apiserver-$kube_version
kubectl_bin=$bin_dir/kubectl-$kube_version
controller_manager_bin=$bin_dir/kube-controller-manager-$kube_version
etcd_bin=$bin_dir/etcd-$etcd_version

die() {
  echo "tests/cluster: $*" >&2
  exit 1
}

need() {
  command -v "$1" >/dev/null 2>&1 || die "'$1' is not installed: $2"
}

# alive PIDFILE: whether the process recorded in PIDFILE runs.
alive() {
  [[ -s $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null
}
