# Sourced by the scripts that build a Go program once into the cache (tests/cluster/build: the control plane;
# tests/registry/build: the registry, oras and cosign; bench/peers/build). Such a build's module sources and
# compiled packages serve that build only (7.7 GB for the control plane and the registry tools on a fresh
# machine, where they filled the disk of a machine that reruns CI), so they go to a scratch directory beside
# the cache, removed when the script ends; the cache keeps the binaries. Sets GOMODCACHE, GOCACHE, GOFLAGS.
# A caller running several such builds can share one scratch directory between them (their packages
# overlap) by naming it in PREFLIGHT_GO_SCRATCH; it then removes the directory itself.
if [[ -z ${PREFLIGHT_GO_SCRATCH:-} ]]; then
  mkdir -p "${PREFLIGHT_CACHE:-$HOME/.cache/preflight}"
  PREFLIGHT_GO_SCRATCH=$(mktemp -d "${PREFLIGHT_CACHE:-$HOME/.cache/preflight}/go-scratch.XXXXXX")
  trap 'rm -rf "$PREFLIGHT_GO_SCRATCH"' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
fi
export GOMODCACHE=$PREFLIGHT_GO_SCRATCH/modules GOCACHE=$PREFLIGHT_GO_SCRATCH/cache GOFLAGS="${GOFLAGS:-} -modcacherw"
