#!/usr/bin/env bash
# hack/e2e.sh: run test/e2e against fleet-controller as shipped, on a real local cluster.
#
# Usage:
#   hack/e2e.sh [go test flags...]     (make test-e2e)
#
# Steps, each timed in the log:
#   1. the Kubernetes components (hack/k8s.sh: envtest's kube-apiserver and etcd, plus
#      kubelet, kube-controller-manager, kube-scheduler and kube-proxy built beside them);
#   2. the images as OCI archives (hack/images.sh), and the e2e worker image: the worker
#      image's /kubectl-fleet plus /idle (hack/pause), a command that waits until stopped,
#      and /post (hack/post), with which a pod writes through the gateway Service;
#   3. a fresh two-node cluster with the images loaded (hack/cluster.sh), in a network
#      namespace of its own;
#   4. two demo Gitea servers (hack/demo.sh) listening on the host's end of the link to
#      that namespace (10.243.0.1), where pods reach them: the flags' one on port 3931
#      (its credentials also labelled for the GiteaServer "demo"), and a second on port
#      3932, whose credentials are labelled for the GiteaServer "second" (test/e2e makes
#      both GiteaServer objects);
#   5. the shipped manifests (config/default through test/e2e/config, which only names
#      the first Gitea), the manager's Gitea token and both servers' gateway
#      credentials; then the DaemonSet's rollout;
#   6. go test -tags e2e ./test/e2e/.
# On exit Gitea and the cluster are stopped and the cluster forgotten; E2E_KEEP=1 leaves
# both running (hack/cluster.sh env prints the KUBECONFIG line).
set -euo pipefail

LIB_LOG_TAG=e2e
# shellcheck source=hack/lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
cd "$PROJECT_ROOT"

export GITEA_HOST=10.243.0.1 DEMO_GITEA_PORT=3931 DEMO_DIR=$PROJECT_ROOT/.cache/e2e-demo
E2E_KEEP=${E2E_KEEP:-0}

stage() {
  local t=$SECONDS
  "$@"
  log "stage done in $((SECONDS - t))s: $*"
}

# The second Gitea: hack/demo.sh's environment for it.
SECOND_DIR=$PROJECT_ROOT/.cache/e2e-demo-second
SECOND=(DEMO_GITEA_PORT=3932 "DEMO_DIR=$SECOND_DIR" DEMO_SERVER=second)

cleanup() {
  local rc=$?
  if [[ $E2E_KEEP == 1 ]]; then
    log "E2E_KEEP=1: Gitea and the cluster keep running ($(hack/cluster.sh env))"
    return
  fi
  if ((rc != 0)) && [[ -n ${KUBECONFIG:-} ]]; then
    kubectl -n fleet-system get pods -o wide >&2 || true
    kubectl -n fleet-system logs -l app.kubernetes.io/name=fleet-controller --tail=40 --prefix >&2 || true
  fi
  hack/demo.sh down >/dev/null 2>&1 || true
  env "${SECOND[@]}" hack/demo.sh down >/dev/null 2>&1 || true
  hack/cluster.sh reset >/dev/null 2>&1 || true
}

install() {
  # shellcheck disable=SC1090
  source "$DEMO_ENV"
  kubectl apply -f "$FLEET_DEMO_MANIFESTS" -f "$SECOND_DIR/manifests" >&2
  kubectl -n fleet-system create secret generic fleet-controller-gitea \
    --from-file=gitea-token="$FLEET_GITEA_TOKEN_FILE" --dry-run=client -o yaml | kubectl apply -f - >&2
  kubectl apply --server-side -k test/e2e/config >&2
  kubectl -n fleet-system rollout status ds/fleet-controller --timeout=300s >&2
}

main() {
  local images
  stage hack/k8s.sh >/dev/null
  images=$(hack/images.sh | tail -n1)
  CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$images/idle" ./hack/pause
  CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$images/post" ./hack/post
  "$images/ociimage" -o "$images/e2e-worker.tar" -name docker.io/library/fleet-e2e-worker:dev \
    -entrypoint /kubectl-fleet -user 65532:65532 -nonroot "$images/kubectl-fleet=/kubectl-fleet" "$images/idle=/idle" "$images/post=/post"
  export FLEET_E2E_PLUGIN=$images/kubectl-fleet
  hack/cluster.sh reset >/dev/null 2>&1 || true
  trap cleanup EXIT
  CLUSTER_IMAGES="$images/manager.tar $images/worker.tar $images/e2e-worker.tar" stage hack/cluster.sh up 2
  eval "$(hack/cluster.sh env)"
  export KUBECONFIG
  DEMO_ENV=$(hack/demo.sh up | tail -n1)
  export FLEET_E2E_GITEA_TOKEN_FILE=$DEMO_DIR/admin-token
  env "${SECOND[@]}" hack/demo.sh up >/dev/null
  export FLEET_E2E_SECOND_GITEA_TOKEN_FILE=$SECOND_DIR/admin-token
  stage install
  log "running test/e2e"
  stage go test -tags e2e -count=1 -timeout 40m ./test/e2e/ "$@"
}

main "$@"
