#!/usr/bin/env bash
# hack/envtest.sh: provide the control-plane binaries controller-runtime's
# envtest needs (kube-apiserver, etcd, and kubectl when the machine has none)
# and print the folder holding them.
#
# Usage:
#   KUBEBUILDER_ASSETS=$(hack/envtest.sh)
#
# Output: the absolute assets folder is the LAST line of stdout (today the
# only one); every progress line goes to stderr. Exit status 0 means the
# folder holds a kube-apiserver whose `--version` reports KUBE_VERSION and a
# working etcd (plus kubectl when wanted). No arguments.
#
# Environment:
#   KUBE_VERSION         Kubernetes release to provide        (default v1.37.2)
#   ENVTEST_CACHE        cache root           (default <project>/.cache/envtest)
#   ENVTEST_KUBECTL      1 = always provide kubectl, 0 = never,
#                        unset/auto = only when `command -v kubectl` finds none
#   ENVTEST_DOWNLOAD     0 = skip the setup-envtest download attempt (default 1)
#   SETUP_ENVTEST_VERSION  setup-envtest module version to `go run`
#                        (default v0.25.1, served by the module proxy)
#   ENVTEST_DOWNLOAD_TIMEOUT  seconds allowed for that attempt (default 60)
#   ENVTEST_INDEX_URL    setup-envtest's release index; the attempt is skipped
#                        when it does not answer within ENVTEST_PROBE_TIMEOUT
#                        seconds (default 5)
#   ENVTEST_HEARTBEAT    seconds between "still running" lines during go build
#                        (default 60)
#
# Layout:
#   <cache>/<kube-version>/          kube-apiserver, etcd[, kubectl]: the output
#   <cache>/build-<kube-version>/    scratch Go module for the source build
#   <cache>/.lock-<kube-version>     flock serialising concurrent runs
#
# How the binaries are obtained, first success wins:
#   1. cache: the folder exists and its binaries run -> print it (~0.1 s);
#   2. download: setup-envtest from the module proxy, bounded by a timeout
#      (it fetches tarballs from the internet, so it fails where only the
#      module proxy is reachable, and then falls through);
#   3. source build through the Go module proxy only: a scratch module that
#      requires k8s.io/kubernetes, with each staging module replaced by its
#      published tag, plus a three-line main around etcdmain for etcd.
#      Cold ~10-18 min on 2 cores, ~2.5 GiB RAM for the linker; with the Go
#      build cache warm it only relinks.
# Binaries are assembled in a temporary folder and moved into place only once
# verified, so an interrupted run never leaves a folder that looks cached.
set -euo pipefail

LIB_LOG_TAG=envtest
# shellcheck source=hack/lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

# Everything written to stdout from here on goes to stderr; fd 3 keeps the
# real stdout for the single result line.
exec 3>&1 1>&2

KUBE_VERSION=${KUBE_VERSION:-v1.37.2}
ENVTEST_CACHE=$(realpath -m -- "${ENVTEST_CACHE:-$PROJECT_ROOT/.cache/envtest}")
ENVTEST_KUBECTL=${ENVTEST_KUBECTL:-auto}
ENVTEST_DOWNLOAD=${ENVTEST_DOWNLOAD:-1}
SETUP_ENVTEST_VERSION=${SETUP_ENVTEST_VERSION:-v0.25.1}
ENVTEST_DOWNLOAD_TIMEOUT=${ENVTEST_DOWNLOAD_TIMEOUT:-60}
ENVTEST_INDEX_URL=${ENVTEST_INDEX_URL:-https://raw.githubusercontent.com/kubernetes-sigs/controller-tools/HEAD/envtest-releases.yaml}
ENVTEST_PROBE_TIMEOUT=${ENVTEST_PROBE_TIMEOUT:-5}
HEARTBEAT_SECONDS=${ENVTEST_HEARTBEAT:-60}

# Go settings for every go command of this script: never pick up a go.work
# from a parent folder, let the scratch module resolve its own requirements,
# and build static binaries (no C toolchain needed).
export GOWORK=off GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0

case $ENVTEST_KUBECTL in
  0 | 1 | auto) ;;
  *) die "ENVTEST_KUBECTL=$ENVTEST_KUBECTL: use 1, 0 or auto" ;;
esac
[[ $KUBE_VERSION =~ ^v1\.([0-9]+)\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] ||
  die "KUBE_VERSION=$KUBE_VERSION is not a v1.<minor>.<patch> release"
KUBE_MINOR=${BASH_REMATCH[1]}
# k8s.io/kubernetes v1.X.Y publishes its staging modules (k8s.io/api,
# k8s.io/apimachinery, ...) as v0.X.Y.
STAGING_VERSION=v0.${KUBE_VERSION#v1.}

ASSETS=$ENVTEST_CACHE/$KUBE_VERSION
BUILD_MODULE=$ENVTEST_CACHE/build-$KUBE_VERSION
TMP_ASSETS=

want_kubectl() {
  case $ENVTEST_KUBECTL in
    1) return 0 ;;
    0) return 1 ;;
    *) ! command -v kubectl >/dev/null 2>&1 ;;
  esac
}

# assets_ok DIR [quiet]: the binaries in DIR run and kube-apiserver reports
# exactly KUBE_VERSION.
assets_ok() {
  local dir=$1 quiet=${2:-}
  local say=log
  [[ -n $quiet ]] && say=:
  local got
  if ! got=$("$dir/kube-apiserver" --version 2>/dev/null); then
    $say "no working kube-apiserver in $dir"
    return 1
  fi
  if [[ $got != "Kubernetes $KUBE_VERSION" ]]; then
    $say "$dir/kube-apiserver reports '$got', want 'Kubernetes $KUBE_VERSION'"
    return 1
  fi
  if ! "$dir/etcd" --version >/dev/null 2>&1; then
    $say "no working etcd in $dir"
    return 1
  fi
  if want_kubectl && ! "$dir/kubectl" version --client >/dev/null 2>&1; then
    $say "no working kubectl in $dir (none on PATH either)"
    return 1
  fi
}

emit() {
  printf '%s\n' "$1" >&3
  exit 0
}

cleanup() {
  stop_background
  if [[ -n $TMP_ASSETS ]]; then
    rm -rf -- "$TMP_ASSETS"
  fi
}

# install_assets: move the verified TMP_ASSETS into place. The folder is
# swapped whole; an older, unusable folder is moved aside first.
install_assets() {
  if [[ -e $ASSETS ]]; then
    local old=$ENVTEST_CACHE/.old-$KUBE_VERSION.$$
    mv -T -- "$ASSETS" "$old"
    rm -rf -- "$old"
  fi
  mv -T -- "$TMP_ASSETS" "$ASSETS"
  TMP_ASSETS=
}

# try_download: setup-envtest's normal path into TMP_ASSETS.
try_download() {
  if [[ $ENVTEST_DOWNLOAD == 0 ]]; then
    log "download skipped (ENVTEST_DOWNLOAD=0)"
    return 1
  fi
  local bindir=$TMP_ASSETS/.setup-envtest dir
  # setup-envtest reads its release index from GitHub. Where that host does not answer
  # within a few seconds (a machine that reaches only the module proxy), the download
  # cannot work: say so and build at once instead of compiling setup-envtest and waiting
  # out its timeout.
  if command -v curl >/dev/null 2>&1 &&
    ! curl -sfI --max-time "$ENVTEST_PROBE_TIMEOUT" -o /dev/null "$ENVTEST_INDEX_URL"; then
    log "the envtest release index ($ENVTEST_INDEX_URL) did not answer within ${ENVTEST_PROBE_TIMEOUT}s; skipping the download"
    return 1
  fi
  log "trying setup-envtest@$SETUP_ENVTEST_VERSION use ${KUBE_VERSION#v} (timeout ${ENVTEST_DOWNLOAD_TIMEOUT}s)"
  # `go run pkg@version` ignores any go.mod around it; GOFLAGS is cleared
  # because -mod=... is rejected in that mode.
  if ! dir=$(cd "$ENVTEST_CACHE" &&
    env -u KUBEBUILDER_ASSETS GOFLAGS= \
      timeout "$ENVTEST_DOWNLOAD_TIMEOUT" \
      go run "sigs.k8s.io/controller-runtime/tools/setup-envtest@$SETUP_ENVTEST_VERSION" \
      use "${KUBE_VERSION#v}" --bin-dir "$bindir" -p path 3>&-); then
    log "setup-envtest failed; falling back to a source build"
    rm -rf -- "$bindir"
    return 1
  fi
  local bin
  for bin in kube-apiserver etcd kubectl; do
    if [[ -e $dir/$bin ]]; then
      cp -- "$dir/$bin" "$TMP_ASSETS/$bin"
    fi
  done
  rm -rf -- "$bindir"
  assets_ok "$TMP_ASSETS"
}

# write_build_module: the scratch module that builds the binaries.
write_build_module() {
  local kmod m
  # The scratch module is the main module for every go command below, so
  # nothing touches the project's own go.mod or a go.work around it.
  mkdir -p "$BUILD_MODULE/cmd/etcd"
  cd "$BUILD_MODULE"
  printf 'module envtestbinaries\n\ngo 1.26.0\n' >go.mod

  log "resolving k8s.io/kubernetes@$KUBE_VERSION through the module proxy"
  kmod=$(go list -m -f '{{.GoMod}}' "k8s.io/kubernetes@$KUBE_VERSION") ||
    die "k8s.io/kubernetes@$KUBE_VERSION is not available from the module proxy"
  [[ -f $kmod ]] || die "cannot download the go.mod of k8s.io/kubernetes@$KUBE_VERSION"
  go mod edit -require="k8s.io/kubernetes@$KUBE_VERSION"

  # kubernetes maps its staging modules to ./staging/... and requires them at
  # v0.0.0. Only modules in both lists are published at STAGING_VERSION; the
  # replace-only ones (sample-controller, sample-cli-plugin) are not served.
  local n=0
  for m in $(staging_modules "$kmod"); do
    go mod edit -replace="$m=$m@$STAGING_VERSION"
    n=$((n + 1))
  done
  ((n > 0)) || die "found no staging modules in $kmod"
  log "scratch module $BUILD_MODULE: $n staging modules pinned to $STAGING_VERSION"

  cat >cmd/etcd/main.go <<'EOF'
// Command etcd runs upstream etcd's server main; the etcd root module itself
// cannot be built with `go build pkg@version`.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
EOF
}

# staging_modules GOMOD: modules that GOMOD both replaces with a ./staging/
# directory and requires at v0.0.0, one per line.
staging_modules() {
  awk '
    /^replace[[:space:]]*\(/ { block = "replace"; next }
    /^require[[:space:]]*\(/ { block = "require"; next }
    /^\)/                    { block = ""; next }
    {
      kind = block
      if ($1 == "replace" || $1 == "require") { kind = $1; $1 = ""; $0 = $0 }
      if (kind == "replace") {
        for (i = 2; i < NF; i++)
          if ($i == "=>" && $(i + 1) ~ /^\.\/staging\//) staged[$1] = 1
      }
      if (kind == "require" && $2 == "v0.0.0") required[$1] = 1
    }
    END { for (m in staged) if (m in required) print m }
  ' "$1" | sort
}

# build_from_source: compile into TMP_ASSETS.
build_from_source() {
  write_build_module

  local ldflags="-s -w" p
  for p in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    ldflags+=" -X $p.gitVersion=$KUBE_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$KUBE_MINOR -X $p.gitTreeState=clean"
  done
  local pkgs=(k8s.io/kubernetes/cmd/kube-apiserver ./cmd/etcd)
  if want_kubectl; then
    pkgs+=(k8s.io/kubernetes/cmd/kubectl)
  fi

  log "go build ${pkgs[*]} (cold: 10-18 min on 2 cores; warm: about a minute)"
  # 3>&-: the build never holds the caller's stdout, even if orphaned.
  with_heartbeat "$HEARTBEAT_SECONDS" "go build" \
    go build -trimpath -ldflags "$ldflags" -o "$TMP_ASSETS/" "${pkgs[@]}" 3>&- ||
    die "go build failed (see above)"
  log "go build done"
  assets_ok "$TMP_ASSETS" || die "the built binaries failed verification"
}

main() {
  if assets_ok "$ASSETS" quiet; then
    emit "$ASSETS"
  fi

  command -v go >/dev/null || die "go is not on PATH"
  mkdir -p "$ENVTEST_CACHE"
  # Signals end the script through its EXIT trap, which also stops a running
  # go build and removes the half-filled temporary folder.
  trap cleanup EXIT
  trap 'exit 129' HUP
  trap 'exit 130' INT
  trap 'exit 143' TERM

  # One provider per version at a time; whoever waited re-checks the cache.
  exec 9>"$ENVTEST_CACHE/.lock-$KUBE_VERSION"
  if ! flock -n 9; then
    log "another run is providing $KUBE_VERSION; waiting for it"
    flock 9
  fi
  if assets_ok "$ASSETS" quiet; then
    log "cached by a concurrent run"
    emit "$ASSETS"
  fi
  if [[ -e $ASSETS ]]; then
    assets_ok "$ASSETS" || true # say why it is being replaced
  fi
  # Leftovers of runs that were killed outright; nobody else can be using
  # them while we hold the lock.
  rm -rf -- "$ENVTEST_CACHE/.tmp-$KUBE_VERSION."* "$ENVTEST_CACHE/.old-$KUBE_VERSION."*

  log "providing envtest binaries for Kubernetes $KUBE_VERSION in $ASSETS"
  TMP_ASSETS=$(mktemp -d "$ENVTEST_CACHE/.tmp-$KUBE_VERSION.XXXXXX")
  chmod 0755 "$TMP_ASSETS"
  if ! try_download; then
    build_from_source
  fi
  install_assets
  log "ready: $("$ASSETS/kube-apiserver" --version), $("$ASSETS/etcd" --version | sed -n 1p)"
  emit "$ASSETS"
}

# Run only when executed, so tests can source the functions.
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  main "$@"
fi
