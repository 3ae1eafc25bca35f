# Step timing for scripts/setup and scripts/test. Sourced, not run.
#   step NAME COMMAND...   runs COMMAND in this shell's context (not behind `||`, so that `set -e` still
#                          stops a failing function midway) and records its wall time and the CPU time of
#                          the processes it ran (user + system, the children this shell waited for);
#   steps_report SCRIPT    prints the recorded steps, the one that was running if the script is ending
#                          early, and the totals. Call it from the script's EXIT trap.
# The CPU column is what tells a CPU-bound fresh machine's steps apart: a step that mostly waits (tests on
# an API server) shows far less CPU than wall time, a compile up to twice its wall time on two cores.

steps=()
ticks_per_second=$(getconf CLK_TCK)
current_step=
step_started=0
step_cpu_started=0

# The CPU time, in clock ticks, of the children this shell has waited for (/proc/PID/stat's cutime + cstime).
children_cpu_ticks() {
  local stat
  read -r stat <"/proc/$$/stat"
  # (fields after the command name, which is in parentheses and may contain spaces: state is the first)
  set -- ${stat##*) }
  echo $((${14} + ${15}))
}

step_line() { # name [suffix]
  local cpu
  cpu=$((($(children_cpu_ticks) - step_cpu_started) / ticks_per_second))
  printf '%6ss %6ss  %s%s' $((SECONDS - step_started)) "$cpu" "$1" "${2:-}"
}

step() { # name command...
  current_step=$1
  step_started=$SECONDS
  step_cpu_started=$(children_cpu_ticks)
  shift
  "$@"
  steps+=("$(step_line "$current_step")")
  current_step=
}

steps_report() { # script-name [exit-status]
  local status=${2:-0}
  [[ -z $current_step ]] || steps+=("$(step_line "$current_step" " (failed: $status)")")
  echo "$1: step times (wall, CPU)"
  printf '  %s\n' "${steps[@]}"
  printf '  %6ss %6ss  %s\n' "$SECONDS" $(($(children_cpu_ticks) / ticks_per_second)) "in all"
}
