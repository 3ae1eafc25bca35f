# A tool: the variable naming it, else the command on PATH, else where the preflight repository's
# scripts/setup installs it (${PREFLIGHT_CACHE:-~/.cache/preflight}); else say how to get it.
cache=${PREFLIGHT_CACHE:-$HOME/.cache/preflight}
find_tool() {
  name=$1
  hint=$2
  shift 2
  if command -v "$name" >/dev/null 2>&1; then
    command -v "$name"
    return
  fi
  for candidate in "$@"; do
    if [ -x "$candidate" ]; then
      echo "$candidate"
      return
    fi
  done
  echo "build.sh: $name is not on PATH nor in $cache: $hint" >&2
  exit 127
}
