# shellcheck shell=bash
# hack/lib.sh: small helpers shared by the hack/ scripts. Source it; it defines
# functions and variables only and runs nothing.
#
#   LIB_LOG_TAG      tag printed in front of every log line (default: script name)
#   PROJECT_ROOT     absolute path of the repository root (set on source)
#
#   log MSG...                   progress line on stderr, with elapsed seconds
#   die MSG...                   log MSG and exit 1
#   with_heartbeat SECS LABEL CMD...
#                                run CMD (an executable, not a function) and
#                                wait for it; every SECS seconds while it
#                                runs, log "LABEL: still running". Returns
#                                CMD's exit status.
#   stop_background              kill what with_heartbeat runs, if anything
#                                (call it from an EXIT trap)

PROJECT_ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
LIB_LOG_TAG=${LIB_LOG_TAG:-$(basename -- "$0" .sh)}

log() {
  printf '[%s %4ds] %s\n' "$LIB_LOG_TAG" "$SECONDS" "$*" >&2
}

die() {
  log "ERROR: $*"
  exit 1
}

# The command runs in the background in its own session (setsid), and this
# shell waits for it. Unlike a foreground command, that lets the caller's
# traps act at once on INT/TERM/HUP: a trap that exits reaches the EXIT trap,
# whose stop_background kills the command's whole process group (go build
# and its compile/link children), so nothing keeps writing after the script
# is gone. The ticker is a background subshell that kills its own sleep when
# stopped and gives up by itself once this shell is gone, so it never holds
# the caller's pipes open for long.
HEARTBEAT_PID=
TASK_PGID=

with_heartbeat() {
  local every=$1 label=$2
  shift 2
  local parent=$$ rc=0
  (
    trap - EXIT INT TERM HUP
    trap 'kill "$nap" 2>/dev/null; exit 0' TERM
    start=$SECONDS
    while :; do
      sleep "$every" &
      nap=$!
      wait "$nap"
      kill -0 "$parent" 2>/dev/null || exit 0
      log "$label: still running ($((SECONDS - start))s)"
    done
  ) &
  HEARTBEAT_PID=$!
  # A background job of a non-interactive shell is never a process group
  # leader, so setsid does not fork and $! is the new group's id.
  setsid "$@" &
  TASK_PGID=$!
  wait "$TASK_PGID" || rc=$?
  TASK_PGID=
  stop_heartbeat
  return "$rc"
}

stop_heartbeat() {
  if [[ -n ${HEARTBEAT_PID:-} ]]; then
    kill "$HEARTBEAT_PID" 2>/dev/null || true
    wait "$HEARTBEAT_PID" 2>/dev/null || true
    HEARTBEAT_PID=
  fi
}

# stop_background: stop what with_heartbeat started, if it still runs. For
# EXIT traps.
stop_background() {
  if [[ -n ${TASK_PGID:-} ]]; then
    kill -TERM -- "-$TASK_PGID" 2>/dev/null || true
    wait "$TASK_PGID" 2>/dev/null || true
    TASK_PGID=
  fi
  stop_heartbeat
}
