#!/usr/bin/env bash
# Prints one digest over the names and contents of every file under the given folders.
# `make verify` compares it before and after regeneration, so it works on a dirty tree too.
set -euo pipefail
find "$@" -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1
