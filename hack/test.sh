#!/usr/bin/env bash
# Runs every test package under the race detector, the SPIN models and make lint (make
# test). Four lanes run at once:
#
#   - lint: make lint (gofmt, go vet, golangci-lint, which is built on first use);
#   - model: the SPIN models (hack/model/run.sh, MODEL_JOBS verifiers at a time, default 1;
#     none when these exact models passed before: MODEL_CACHE=use);
#   - ginkgo: the Ginkgo suites of the TaskClaim, RetirementPlan and GiteaRepository
#     reconcilers, the longest, through the Ginkgo CLI with their specs spread over GINKGO_PROCS processes
#     (default 2). Each process starts its own envtest and, where the suite needs one, its
#     own Gitea, so the processes share nothing; specs marked Serial run alone at the end,
#     Ordered containers stay on one process;
#   - gotest: every other package through go test, GO_TEST_P at a time (default 2), the
#     slowest first so that they do not start last.
#
# lint and model start at once; the test lanes start when envtest's binaries and the
# Gitea server are there (hack/envtest.sh and hack/gitea.sh build them on a new machine,
# or wait for the build .ci/run started). The suites mostly wait (on the API server, on
# Gitea, on the manager's next reconcile), so lint and the models use CPU the tests leave
# idle, and on a new machine neither waits for the other nor for the toolchains.
#
# Each lane's output is kept in .cache/test-<lane>.log and printed when the lane ends; the
# script fails when any lane does.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .cache

procs=${GINKGO_PROCS:-2}
gop=${GO_TEST_P:-2}
ginkgo_suites=(./controllers/taskclaim ./controllers/retirementplan ./controllers/gitearepository)
slowest_first=(./test/fleet ./internal/gateway ./internal/cli ./test/quickstart ./internal/giteaclaim)

lane() {
	local name=$1
	shift
	local start=$SECONDS rc=0
	"$@" >".cache/test-$name.log" 2>&1 || rc=$?
	{
		# The lane runs in a subshell of its own: times' second line is the CPU its
		# processes used (user, system). times runs in this shell, not in a $(...)
		# subshell, whose own count starts at zero.
		times >".cache/test-$name.cpu"
		echo "=== lane $name ($*): exit $rc after $((SECONDS - start))s, CPU $(tail -n1 ".cache/test-$name.cpu")"
		cat ".cache/test-$name.log"
	} >&2
	return "$rc"
}

pids=()
lane lint make --no-print-directory lint &
pids+=($!)
lane model env MODEL_CACHE=use MODEL_JOBS="${MODEL_JOBS:-1}" hack/model/run.sh &
pids+=($!)

rc=0
assets=$(hack/envtest.sh | tail -n1) && hack/gitea.sh build >&2 || rc=$?
if ((rc == 0)); then
	echo "KUBEBUILDER_ASSETS=$assets"
	export KUBEBUILDER_ASSETS=$assets FLEET_GITEA_SCRIPT=$PWD/hack/gitea.sh
	module=$(go list -m)
	mapfile -t rest < <(go list ./... | grep -v -x -e "$module/controllers/taskclaim" -e "$module/controllers/retirementplan" -e "$module/controllers/gitearepository")
	lane ginkgo go tool ginkgo --procs="$procs" --race --timeout=40m --keep-going "${ginkgo_suites[@]}" &
	pids+=($!)
	lane gotest go test -p "$gop" -race -count=1 -timeout=40m "${slowest_first[@]}" "${rest[@]}" || rc=$?
else
	echo "test: the toolchains could not be provided; no test ran" >&2
fi
for pid in "${pids[@]}"; do
	wait "$pid" || rc=$?
done
exit "$rc"
