#!/usr/bin/env bash
# hack/k8s.sh: provide the Kubernetes components a real local cluster needs
# beyond envtest's (kubelet, kube-controller-manager, kube-scheduler,
# kube-proxy) and print the folder holding them, with envtest's
# kube-apiserver and etcd linked in beside them.
#
# Usage:
#   K8S_BIN=$(hack/k8s.sh)
#
# Output: the absolute folder is the LAST line of stdout; progress goes to
# stderr. Exit status 0 means every binary in it runs and reports
# KUBE_VERSION.
#
# The components are built from source through the Go module proxy, in the
# same scratch module and with the same flags as hack/envtest.sh's
# kube-apiserver, so the Go build cache that build filled serves this one:
# cold after envtest about 8-12 min on 2 cores; warm, a relink.
#
# Environment:
#   KUBE_VERSION   Kubernetes release                     (default v1.37.2)
#   K8S_CACHE      output root          (default <project>/.cache/k8s)
#   ENVTEST_CACHE  as for hack/envtest.sh (the shared scratch module)
set -euo pipefail

HERE=$(dirname -- "${BASH_SOURCE[0]}")
# shellcheck source=hack/envtest.sh
source "$HERE/envtest.sh" # functions and settings only; its main is not run
LIB_LOG_TAG=k8s

K8S_CACHE=$(realpath -m -- "${K8S_CACHE:-$PROJECT_ROOT/.cache/k8s}")
OUT=$K8S_CACHE/$KUBE_VERSION
COMPONENTS=(kubelet kube-controller-manager kube-scheduler kube-proxy)

components_ok() {
  local dir=$1 c got
  for c in "${COMPONENTS[@]}" kube-apiserver; do
    got=$("$dir/$c" --version 2>/dev/null) || return 1
    [[ $got == "Kubernetes $KUBE_VERSION" ]] || return 1
  done
  "$dir/etcd" --version >/dev/null 2>&1
}

k8s_main() {
  if components_ok "$OUT"; then
    emit "$OUT"
  fi
  local assets
  assets=$("$HERE/envtest.sh" 3>&-) || die "hack/envtest.sh failed"
  mkdir -p "$K8S_CACHE"
  exec 9>"$K8S_CACHE/.lock-$KUBE_VERSION"
  flock 9
  if components_ok "$OUT"; then
    emit "$OUT"
  fi
  TMP_ASSETS=$(mktemp -d "$K8S_CACHE/.tmp-$KUBE_VERSION.XXXXXX")
  chmod 0755 "$TMP_ASSETS"
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  write_build_module
  local ldflags="-s -w" p pkgs=()
  for p in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    ldflags+=" -X $p.gitVersion=$KUBE_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$KUBE_MINOR -X $p.gitTreeState=clean"
  done
  for p in "${COMPONENTS[@]}"; do
    pkgs+=("k8s.io/kubernetes/cmd/$p")
  done
  log "go build ${COMPONENTS[*]} (after envtest's build: about 10 min cold on 2 cores)"
  with_heartbeat "$HEARTBEAT_SECONDS" "go build" \
    go build -trimpath -ldflags "$ldflags" -o "$TMP_ASSETS/" "${pkgs[@]}" 3>&- ||
    die "go build failed (see above)"
  ln -s "$assets/kube-apiserver" "$TMP_ASSETS/kube-apiserver"
  ln -s "$assets/etcd" "$TMP_ASSETS/etcd"
  components_ok "$TMP_ASSETS" || die "the built components failed verification"
  rm -rf -- "$OUT"
  mv -T -- "$TMP_ASSETS" "$OUT"
  TMP_ASSETS=
  log "ready: $OUT"
  emit "$OUT"
}

# hack/envtest.sh, sourced above, already moved stdout to fd 3 and progress to stderr.
k8s_main "$@"
