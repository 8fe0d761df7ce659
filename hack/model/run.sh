#!/usr/bin/env bash
# Model-checks the claim and apply protocols with SPIN (docs/protocols.md).
#
# Every model runs exhaustively (no bitstate, no hash compaction). The real models must
# pass; every mutant must yield a counterexample (a trail). Prints the state counts of each
# run and fails on any violation, any mutant that passes, or any run that did not finish.
# Installs SPIN (the Debian package) when it is missing.
set -euo pipefail
cd "$(dirname "$0")"
here=$PWD

if ! command -v spin >/dev/null 2>&1; then
	echo "model: installing SPIN (apt-get install spin)" >&2
	sudo=""
	if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
	$sudo apt-get update >&2
	$sudo apt-get install -y spin >&2
fi
command -v gcc >/dev/null 2>&1 || { echo "model: gcc is needed to compile the verifiers" >&2; exit 1; }

# A verdict depends only on the models, this script, SPIN and gcc. A run where every case
# came out as it must is recorded under the digest of all four; with MODEL_CACHE=use (make
# test) a recorded run is shown instead of searching again, as go test reuses a result
# whose inputs did not change. make model always searches.
cache=${MODEL_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/fleet-controller/model}
key=$({ cat claim.pml apply.pml run.sh; spin -V; gcc --version | head -n1; } | sha256sum | cut -c1-40)
if [ "${MODEL_CACHE:-}" = use ] && [ -s "$cache/$key" ]; then
	echo "model: unchanged since a full search passed ($cache/$key; make model searches again):"
	cat "$cache/$key"
	exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/fleet-model.XXXXXX")
trap 'rm -rf "$work"' EXIT
jobs_max=${MODEL_JOBS:-2}
# Only a search that never ends should hit this. claim-live takes 330-460 s alone on two
# cores, and passed 540 s on a new machine where the models ran beside the toolchain
# builds of .ci/run, which failed make test although nothing was wrong.
case_timeout=${MODEL_CASE_TIMEOUT:-1500}
# Memory per verifier, in MiB: two run at once on the CI machine (24 GiB).
memlim=${MODEL_MEMLIM:-10240}

# name | model | expectation (pass|fail) | kind (safety|liveness) | never claim | spin -D flags
# Every claim run is at the full size: 3 workers (claims) and 2 targets, claims 0 and 1
# contending for target 0 and claim 2 on target 1 (claim-one-target puts all three on
# target 0). Each run holds one fault (a crash at any step, or a Gitea transport fault)
# and one clock event; the outside writer runs with the faults in claim-outside-writer.
# The liveness run leaves the outside writer out (docs/protocols.md says why). The
# longest runs come first, so the two slots finish close together.
cases=(
	"claim-live               |claim.pml|pass|liveness|live  |-DNO_OUTSIDER -DLIVE"
	"claim-outside-writer     |claim.pml|pass|safety  |safety|"
	"apply                    |apply.pml|pass|safety  |report|"
	"claim                    |claim.pml|pass|safety  |safety|-DNO_OUTSIDER"
	"claim-one-target         |claim.pml|pass|safety  |safety|-DNO_OUTSIDER -DTGT2=0"
	"claim-no-readback        |claim.pml|fail|safety  |safety|-DMUTANT_NO_READBACK"
	"claim-no-content-version |claim.pml|fail|safety  |safety|-DNO_OUTSIDER -DMUTANT_NO_CONTENT_VERSION"
	"claim-main-end-order     |claim.pml|fail|safety  |safety|-DNO_OUTSIDER -DMAIN_END_ORDER"
	"apply-no-reprobe         |apply.pml|fail|safety  |report|-DMUTANT_NO_REPROBE"
	"apply-no-intent-cas      |apply.pml|fail|safety  |report|-DMUTANT_NO_INTENT_CAS"
	"apply-fence-after-read   |apply.pml|fail|safety  |report|-DMUTANT_FENCE_AFTER_READ"
	"apply-takeover-early     |apply.pml|fail|safety  |report|-DMUTANT_TAKEOVER_EARLY"
	"apply-lost-no-cas        |apply.pml|fail|safety  |report|-DMUTANT_LOST_NO_CAS"
	"apply-resume-no-revalidate|apply.pml|fail|safety |report|-DMUTANT_RESUME_NO_REVALIDATE"
	"apply-resume-no-version  |apply.pml|fail|safety  |report|-DMUTANT_RESUME_NO_VERSION"
)

trim() { local s=$1; s=${s#"${s%%[![:space:]]*}"}; s=${s%"${s##*[![:space:]]}"}; printf '%s' "$s"; }

run_case() {
	local name=$1 model=$2 expect=$3 kind=$4 claim=$5 flags=$6
	local dir=$work/$name
	mkdir -p "$dir"
	cp "$here/$model" "$dir/"
	(
		cd "$dir"
		# shellcheck disable=SC2086
		spin -a $flags "$model" >spin.log 2>&1 || { echo "spin -a failed"; cat spin.log; exit 2; }
		local cflags="-O2 -w -DCOLLAPSE -DMEMLIM=$memlim"
		local pflags="-m1000000 -N $claim"
		if [ "$kind" = safety ]; then
			cflags="$cflags -DSAFETY"
		else
			cflags="$cflags -DNOREDUCE -DNFAIR=9"
			pflags="-a -f $pflags"
		fi
		# shellcheck disable=SC2086
		gcc $cflags -o pan pan.c >gcc.log 2>&1 || { echo "gcc failed"; cat gcc.log; exit 2; }
		rc=0
		# shellcheck disable=SC2086
		timeout "$case_timeout" ./pan $pflags >pan.log 2>&1 || rc=$?
		echo "$rc" >pan.rc
	) >"$dir/run.log" 2>&1
	local log=$dir/pan.log verdict
	local errors states transitions depth secs mem
	errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$log" | tail -n1)
	states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' "$log" | tail -n1)
	transitions=$(sed -n 's/^ *\([0-9.e+]*\) transitions.*/\1/p' "$log" | tail -n1)
	depth=$(sed -n 's/.*depth reached \([0-9]*\).*/\1/p' "$log" | tail -n1)
	secs=$(sed -n 's/^pan: elapsed time \([0-9.e+]*\).*/\1/p' "$log" | tail -n1)
	mem=$(sed -n 's/^ *\([0-9.]*\)[[:space:]]*total actual memory usage.*/\1/p' "$log" | tail -n1)
	if [ "$(cat "$dir/pan.rc" 2>/dev/null)" = 124 ]; then
		verdict="BROKEN (timed out after ${case_timeout}s: the search was not exhaustive)"
	elif grep -qE "out of memory|reached -DMEMLIM bound" "$log"; then
		verdict="BROKEN (memory exhausted: the search was not exhaustive)"
	elif [ -z "$errors" ]; then
		verdict="BROKEN (the run did not finish; see $dir/run.log, $log)"
		cat "$dir/run.log" >&2 || true
		tail -n 5 "$log" >&2 || true
	elif grep -q "max search depth too small" "$log"; then
		verdict="BROKEN (search depth too small: the search was not exhaustive)"
	elif [ "$expect" = pass ] && [ "$errors" = 0 ]; then
		verdict="ok (passes)"
	elif [ "$expect" = fail ] && [ "$errors" != 0 ] && ls "$dir"/*.trail >/dev/null 2>&1; then
		verdict="ok (counterexample found, as it must)"
	elif [ "$expect" = pass ]; then
		verdict="FAILED (a property is violated)"
		grep -E "violated|acceptance cycle" "$log" >&2 || true
		(cd "$dir" && spin -t -p $flags "$model" 2>&1 | tail -n 40) >&2 || true
	else
		verdict="FAILED (the mutant passes: the model no longer needs what it removes)"
	fi
	printf '%-26s %-9s states stored %-10s transitions %-10s depth %-5s %8s MB %7ss  %s\n' \
		"$name" "$model" "${states:-?}" "${transitions:-?}" "${depth:-?}" "${mem:-?}" "${secs:-?}" "$verdict" >"$dir/result"
}

start=$(date +%s)
running=0
for c in "${cases[@]}"; do
	IFS='|' read -r name model expect kind claim flags <<<"$c"
	run_case "$(trim "$name")" "$(trim "$model")" "$(trim "$expect")" "$(trim "$kind")" "$(trim "$claim")" "$(trim "$flags")" &
	running=$((running + 1))
	if [ "$running" -ge "$jobs_max" ]; then
		wait -n || true
		running=$((running - 1))
	fi
done
wait

status=0
{
	echo "SPIN $(spin -V | sed -n 's/Spin Version \([^ ]*\).*/\1/p'), exhaustive search; $(( $(date +%s) - start ))s in all ($(date -u +%Y-%m-%dT%H:%MZ))"
	for c in "${cases[@]}"; do
		IFS='|' read -r name _ <<<"$c"
		cat "$work/$(trim "$name")/result"
	done
} >"$work/report"
cat "$work/report"
grep -qv " ok (\|^SPIN " "$work/report" && status=1
if [ "$status" -ne 0 ]; then
	echo "model: FAILED" >&2
	exit "$status"
fi
mkdir -p "$cache" && cp "$work/report" "$cache/$key" || echo "model: could not record the verdict in $cache" >&2
exit 0
