#!/usr/bin/env bash
# hack/images.sh: build fleet-controller's images as OCI archives, without Docker or a
# registry, and print the folder holding them.
#
# Usage:
#   IMAGES=$(hack/images.sh)          # then: hack/cluster.sh load "$IMAGES"/*.tar
#
# Images (static binaries, non-root user 65532, the host's CA bundle, nothing else):
#   manager.tar  docker.io/library/fleet-controller:$IMAGE_TAG   /manager, as the
#                Dockerfile builds it (the nolocalcp tag: no embedded control plane)
#   worker.tar   docker.io/library/fleet-worker:$IMAGE_TAG       /kubectl-fleet, the
#                worker's command line (register, run, claim, token, ...)
#
# Environment:
#   IMAGE_TAG   the images' tag            (default dev; config/manager names fleet-controller:dev)
#   IMAGES_DIR  output folder              (default <project>/bin/images)
set -euo pipefail

LIB_LOG_TAG=images
# shellcheck source=hack/lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

IMAGE_TAG=${IMAGE_TAG:-dev}
IMAGES_DIR=$(realpath -m -- "${IMAGES_DIR:-$PROJECT_ROOT/bin/images}")
CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt

cd "$PROJECT_ROOT"
mkdir -p "$IMAGES_DIR"
export CGO_ENABLED=0 GOOS=linux
log "building the static binaries"
go build -trimpath -tags nolocalcp -ldflags='-s -w' -o "$IMAGES_DIR/manager" ./cmd
go build -trimpath -ldflags='-s -w' -o "$IMAGES_DIR/kubectl-fleet" ./cmd/kubectl-fleet
go build -o "$IMAGES_DIR/ociimage" ./hack/ociimage

extra=()
[[ -f $CA_BUNDLE ]] && extra+=("$CA_BUNDLE=$CA_BUNDLE")
"$IMAGES_DIR/ociimage" -o "$IMAGES_DIR/manager.tar" -name "docker.io/library/fleet-controller:$IMAGE_TAG" \
  -entrypoint /manager -user 65532:65532 -nonroot "$IMAGES_DIR/manager=/manager" "${extra[@]}"
"$IMAGES_DIR/ociimage" -o "$IMAGES_DIR/worker.tar" -name "docker.io/library/fleet-worker:$IMAGE_TAG" \
  -entrypoint /kubectl-fleet -user 65532:65532 -nonroot "$IMAGES_DIR/kubectl-fleet=/kubectl-fleet" "${extra[@]}"
log "manager.tar and worker.tar ($IMAGE_TAG) in $IMAGES_DIR"
echo "$IMAGES_DIR"
