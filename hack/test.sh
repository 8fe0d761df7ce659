#!/usr/bin/env bash
# Runs every test package under the race detector (make test). The suites mostly wait (on
# the API server, on Gitea, on the manager's next reconcile), so one lane leaves the CPU
# idle half the time. Two lanes run at once:
#
#   - the Ginkgo suites of the TaskClaim and RetirementPlan reconcilers, the longest, through
#     the Ginkgo CLI with their specs spread over GINKGO_PROCS processes (default 2). Each
#     process starts its own envtest and, where the suite needs one, its own Gitea, so the
#     processes share nothing; specs marked Serial run alone at the end, Ordered containers
#     stay on one process;
#   - every other package through go test, GO_TEST_P at a time (default 2), the slowest
#     first so that they do not start last.
#
# Each lane's output is kept in .cache/test-<lane>.log and printed when the lane ends; the
# script fails when either lane does. The environment carries KUBEBUILDER_ASSETS and
# FLEET_GITEA_SCRIPT (see the Makefile).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .cache

procs=${GINKGO_PROCS:-2}
gop=${GO_TEST_P:-2}
ginkgo_suites=(./controllers/taskclaim ./controllers/retirementplan)
slowest_first=(./test/fleet ./internal/gateway ./internal/cli ./test/quickstart ./internal/giteaclaim)
module=$(go list -m)
mapfile -t rest < <(go list ./... | grep -v -x -e "$module/controllers/taskclaim" -e "$module/controllers/retirementplan")

lane() {
	local name=$1
	shift
	local start=$SECONDS rc=0
	"$@" >".cache/test-$name.log" 2>&1 || rc=$?
	{
		echo "=== lane $name ($*): exit $rc after $((SECONDS - start))s"
		cat ".cache/test-$name.log"
	} >&2
	return "$rc"
}

lane ginkgo go tool ginkgo --procs="$procs" --race --timeout=40m --keep-going "${ginkgo_suites[@]}" &
ginkgo_pid=$!
rc=0
lane gotest go test -p "$gop" -race -count=1 -timeout=40m "${slowest_first[@]}" "${rest[@]}" || rc=$?
wait "$ginkgo_pid" || rc=$?
exit "$rc"
