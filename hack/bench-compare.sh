#!/usr/bin/env bash
# hack/bench-compare.sh: run the Go benchmarks of two commits in the same run, in turns,
# so that a regression can be told from noise (the machine's load moves both sides alike).
#
# Usage:
#   hack/bench-compare.sh [-n ROUNDS] [-b BENCH_REGEX] [-p PACKAGE] [-o DIR] \
#     BASE_REF [HEAD_REF] [-- TEST_BINARY_ARGS...]
#
#   BASE_REF     the commit to compare against, e.g. HEAD~1 or main
#   HEAD_REF     the commit to compare (default: the working tree of this repository,
#                uncommitted changes included)
#   -n ROUNDS    how many times each side runs (default 3)
#   -b REGEX     the benchmarks to run, as -test.bench takes it (default .)
#   -p PACKAGE   the package holding them (default ./test/bench/)
#   -o DIR       where the outputs go (default: a new temporary folder, printed)
#   -- ARGS      passed to both test binaries after the script's flags, so they win:
#                e.g. -- -test.benchtime=3x -test.cpu=1
#
# Steps: a detached git worktree for BASE_REF (and for HEAD_REF when given) in a temporary
# folder, with this repository's .cache linked in; one test binary per side (go test -c,
# built inside its tree); then base, head, base, head, ... ROUNDS times each, every binary
# in its own package folder with
#   -test.run '^$' -test.bench REGEX -test.benchmem -test.benchtime=1x ARGS...
# Each run's output (stdout and stderr) is DIR/base.N.txt or DIR/head.N.txt. At the end:
# the lines the benchmarks print themselves that mention a ratio, then for every benchmark
# and metric (ns/op, B/op, allocs/op and the b.ReportMetric units) the median of each
# side, head/base, and each side's spread ((max-min)/median over the rounds). When
# benchstat is found (BENCHSTAT, a command, or benchstat on PATH; e.g.
# BENCHSTAT='go run golang.org/x/perf/cmd/benchstat@latest') its comparison follows.
#
# Environment: KUBEBUILDER_ASSETS (default .cache/envtest/v1.37.2 when it exists),
# FLEET_GITEA_SCRIPT (default hack/gitea.sh of this repository) and the benchmarks' own
# FLEET_BENCH_* variables reach both binaries unchanged. BENCH_HEARTBEAT: seconds between
# "still running" lines (default 60).
#
# The worktrees and binaries are removed on exit (git worktree remove --force); DIR stays.
set -euo pipefail

LIB_LOG_TAG="bench-compare"
# shellcheck source=hack/lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
ROOT=$PROJECT_ROOT

usage() {
  sed -n '/^# Usage:/,/^# Steps:/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
  exit 2
}

rounds=3
bench='.'
package=./test/bench/
outdir=
while getopts 'n:b:p:o:h' opt; do
  case $opt in
    n) rounds=$OPTARG ;;
    b) bench=$OPTARG ;;
    p) package=$OPTARG ;;
    o) outdir=$OPTARG ;;
    *) usage ;;
  esac
done
shift $((OPTIND - 1))
refs=()
while (($# > 0)) && [[ $1 != -- ]]; do
  refs+=("$1")
  shift
done
(($# > 0)) && shift # the --
extra=("$@")
((${#refs[@]} >= 1 && ${#refs[@]} <= 2)) || usage
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "-n $rounds: want a positive number of rounds"
HEARTBEAT_SECONDS=${BENCH_HEARTBEAT:-60}

base_ref=${refs[0]}
head_ref=${refs[1]:-}
base_sha=$(git -C "$ROOT" rev-parse --verify --quiet "$base_ref^{commit}") ||
  die "$base_ref: no such commit"
if [[ -n $head_ref ]]; then
  head_sha=$(git -C "$ROOT" rev-parse --verify --quiet "$head_ref^{commit}") ||
    die "$head_ref: no such commit"
fi

if [[ -z ${KUBEBUILDER_ASSETS:-} && -d $ROOT/.cache/envtest/v1.37.2 ]]; then
  export KUBEBUILDER_ASSETS=$ROOT/.cache/envtest/v1.37.2
fi
export FLEET_GITEA_SCRIPT=${FLEET_GITEA_SCRIPT:-$ROOT/hack/gitea.sh}
[[ -n ${KUBEBUILDER_ASSETS:-} ]] ||
  log "KUBEBUILDER_ASSETS is not set and $ROOT/.cache/envtest/v1.37.2 is missing: the envtest benchmarks will skip (hack/envtest.sh provides it)"

if [[ -n $outdir ]]; then
  mkdir -p -- "$outdir"
  outdir=$(cd -- "$outdir" && pwd)
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/bench-compare.XXXXXX")
worktrees=()

# descendants PID: every process below PID, one pid a line.
descendants() {
  local p
  for p in $(pgrep -P "$1" || true); do
    echo "$p"
    descendants "$p"
  done
}

# running PID...: whether any of them still runs (a zombie does not).
running() {
  local p
  for p; do
    [[ $(ps -o stat= -p "$p" 2>/dev/null) == [^Z]* ]] && return 0
  done
  return 1
}

cleanup() {
  local wt strays=() i
  # envtest starts etcd and kube-apiserver in process groups of their own, which
  # stop_background does not reach: note a running benchmark's descendants first, and
  # stop them after it (SIGKILL after 10 s).
  [[ -n ${TASK_PGID:-} ]] && mapfile -t strays < <(descendants "$TASK_PGID")
  stop_background
  if ((${#strays[@]} > 0)); then
    kill -TERM "${strays[@]}" 2>/dev/null || true
    for ((i = 0; i < 20; i++)); do
      running "${strays[@]}" || break
      sleep 0.5
    done
    kill -KILL "${strays[@]}" 2>/dev/null || true
  fi
  for wt in "${worktrees[@]}"; do
    # Unlink .cache first, so nothing below ever walks into the main tree's cache.
    [[ -L $wt/.cache ]] && rm -f -- "$wt/.cache"
    git -C "$ROOT" worktree remove --force "$wt" >/dev/null 2>&1 || log "could not remove the worktree $wt"
  done
  rm -rf -- "$work"
  git -C "$ROOT" worktree prune >/dev/null 2>&1 || true
}
# Signals end the script through its EXIT trap, which also stops a running build or
# benchmark (with_heartbeat runs them in their own process group).
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

# tree_of SIDE SHA: a detached worktree of SHA for SIDE, with this repository's .cache.
tree_of() {
  local side=$1 sha=$2 wt=$work/$1 msg
  msg=$(git -C "$ROOT" worktree add --detach "$wt" "$sha" 2>&1) ||
    die "git worktree add --detach $wt $sha failed: $msg"
  worktrees+=("$wt")
  if [[ -e $ROOT/.cache && ! -e $wt/.cache && ! -L $wt/.cache ]]; then
    ln -s -- "$ROOT/.cache" "$wt/.cache"
  fi
  log "$side: $sha in $wt"
}

declare -A tree bin dir
tree[base]=$work/base
tree_of base "$base_sha"
if [[ -n $head_ref ]]; then
  tree[head]=$work/head
  tree_of head "$head_sha"
  head_label="$head_ref ($head_sha)"
else
  tree[head]=$ROOT
  head_label="the working tree of $ROOT ($(git -C "$ROOT" rev-parse HEAD) plus its changes)"
fi
base_label="$base_ref ($base_sha)"

# Build each side's test binary inside its tree, and find its package folder there.
for side in base head; do
  bin[$side]=$work/$side.test
  log "$side: go test -c $package"
  with_heartbeat "$HEARTBEAT_SECONDS" "$side: go test -c" \
    env -C "${tree[$side]}" go test -c -o "${bin[$side]}" "$package" ||
    die "$side: go test -c $package failed in ${tree[$side]}"
  [[ -x ${bin[$side]} ]] || die "$side: $package has no test files in ${tree[$side]}"
  dir[$side]=$(cd "${tree[$side]}" && go list -f '{{.Dir}}' "$package") ||
    die "$side: go list $package failed in ${tree[$side]}"
done

[[ -n $outdir ]] || outdir=$(mktemp -d "${TMPDIR:-/tmp}/bench-compare-out.XXXXXX")
log "output: $outdir"
args=(-test.run '^$' -test.bench "$bench" -test.benchmem -test.benchtime=1x "${extra[@]}")
for ((i = 1; i <= rounds; i++)); do
  for side in base head; do
    out=$outdir/$side.$i.txt
    start=$SECONDS
    rc=0
    # The binary runs in its package folder and writes to $out; heartbeats go to stderr.
    # shellcheck disable=SC2016 # $1, $2 and $@ are bash -c's own arguments
    with_heartbeat "$HEARTBEAT_SECONDS" "$side round $i/$rounds" \
      bash -c 'cd "$1" && exec "${@:3}" >"$2" 2>&1' _ "${dir[$side]}" "$out" "${bin[$side]}" "${args[@]}" ||
      rc=$?
    if ((rc != 0)); then
      tail -n 40 -- "$out" >&2 || true
      die "$side round $i exited $rc (output: $out)"
    fi
    log "$side round $i/$rounds done in $((SECONDS - start))s: $out"
  done
done

echo "base: $base_label"
echo "head: $head_label"
echo "rounds: $rounds, benchmarks: $bench in $package, output: $outdir"
for side in base head; do
  echo
  echo "== $side: lines that mention a ratio"
  for ((i = 1; i <= rounds; i++)); do
    { grep -E '[Rr]atio [0-9]|[0-9]x \(|[0-9]x the' -- "$outdir/$side.$i.txt" || true; } | { grep -v '^Benchmark' || true; } |
      sed "s/^/$side.$i: /"
  done
done

echo
echo "== medians over $rounds round(s) (spread: (max-min)/median of the side)"
files=()
for ((i = 1; i <= rounds; i++)); do
  files+=("$outdir/base.$i.txt" "$outdir/head.$i.txt")
done
awk '
  function side_of(file) { sub(/.*\//, "", file); sub(/\..*/, "", file); return file }
  # median of v[key, 1..n], sorted in place
  function median(key, n,   i, j, t) {
    for (i = 2; i <= n; i++) {
      t = v[key, i]
      for (j = i - 1; j >= 1 && v[key, j] > t; j--) v[key, j + 1] = v[key, j]
      v[key, j + 1] = t
    }
    if (n % 2) return v[key, (n + 1) / 2]
    return (v[key, n / 2] + v[key, n / 2 + 1]) / 2
  }
  function num(x) {
    if (x >= 1000 || x <= -1000) return sprintf("%.0f", x)
    return sprintf("%.4g", x)
  }
  function spread(key, n, m) {
    if (n < 2) return "-"
    if (m == 0) return (v[key, n] == v[key, 1]) ? "0.0%" : "-"
    return sprintf("%.1f%%", (v[key, n] - v[key, 1]) / (m < 0 ? -m : m) * 100)
  }
  # A result line: name, iterations, then value-unit pairs.
  $1 ~ /^Benchmark/ && $2 ~ /^[0-9]+$/ && NF >= 4 && NF % 2 == 0 {
    s = side_of(FILENAME)
    if (!($1 in seen)) { seen[$1] = 1; names[++nnames] = $1 }
    for (i = 3; i < NF; i += 2) {
      u = $(i + 1)
      if (!(($1, u) in useen)) { useen[$1, u] = 1; units[$1, ++nunits[$1]] = u }
      k = s SUBSEP $1 SUBSEP u
      v[k, ++cnt[k]] = $i + 0
    }
  }
  END {
    if (nnames == 0) { print "no benchmark results (did -b match any benchmark, and did they skip?)"; exit }
    w = length("benchmark")
    for (a = 1; a <= nnames; a++) if (length(names[a]) > w) w = length(names[a])
    fmt = "%-" w "s  %-24s %14s %14s %9s %8s %8s %5s\n"
    printf fmt, "benchmark", "metric", "base", "head", "head/base", "b-spread", "h-spread", "n"
    for (a = 1; a <= nnames; a++) {
      name = names[a]
      for (b = 1; b <= nunits[name]; b++) {
        u = units[name, b]
        kb = "base" SUBSEP name SUBSEP u; nb = cnt[kb] + 0
        kh = "head" SUBSEP name SUBSEP u; nh = cnt[kh] + 0
        mb = nb ? median(kb, nb) : ""
        mh = nh ? median(kh, nh) : ""
        r = "-"
        if (nb && nh) {
          if (mb != 0) r = sprintf("%.3f", mh / mb)
          else if (mh == 0) r = "1.000"
          else r = "inf"
        }
        printf fmt, name, u, nb ? num(mb) : "-", nh ? num(mh) : "-", r,
          nb ? spread(kb, nb, mb) : "-", nh ? spread(kh, nh, mh) : "-", nb "/" nh
      }
    }
  }
' "${files[@]}"

benchstat=()
if [[ -n ${BENCHSTAT:-} ]]; then
  read -ra benchstat <<<"$BENCHSTAT"
elif command -v benchstat >/dev/null 2>&1; then
  benchstat=(benchstat)
fi
if ((${#benchstat[@]} > 0)); then
  echo
  echo "== benchstat"
  base_files=() head_files=()
  for ((i = 1; i <= rounds; i++)); do
    base_files+=("$outdir/base.$i.txt")
    head_files+=("$outdir/head.$i.txt")
  done
  cat -- "${base_files[@]}" >"$work/base.txt"
  cat -- "${head_files[@]}" >"$work/head.txt"
  (cd "$work" && "${benchstat[@]}" base.txt head.txt) || log "benchstat failed (${benchstat[*]})"
fi
