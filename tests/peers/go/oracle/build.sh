#!/usr/bin/env bash
# Builds the dubbo-go 3.3.2 router oracle into OUT (OUT/oracle): dubbo-go's condition, tag and
# affinity routers and its configurators answering the Java oracle's line protocol
# (tests/support/router_oracle.py).
# Modules come from the Go module proxy into the module cache (~/go/pkg/mod) once.
set -euo pipefail
out=${1:?usage: build.sh OUT}
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
command -v go >/dev/null || { echo "build.sh: go is not on PATH" >&2; exit 1; }
export GOFLAGS=-mod=mod
mkdir -p "$out"
go build -o "$out/oracle" .
