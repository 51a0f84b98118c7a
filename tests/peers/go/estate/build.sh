#!/usr/bin/env bash
# Builds the dubbo-go 3.3 live-estate peer into OUT (OUT/provider, OUT/consumer and
# OUT/userservice, estate.UserService over dubbo/hessian2 for generic calls).
# demo/*.go are generated from protos/demo/greeter.proto and committed (see demo/README.md):
# dubbo-go's Triple generator is not served by the Go module proxy, so a build needs only Go.
# Modules come from the Go module proxy into the module cache (~/go/pkg/mod) once.
set -euo pipefail
out=${1:?usage: build.sh OUT}
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
command -v go >/dev/null || { echo "build.sh: go is not on PATH" >&2; exit 1; }
export GOFLAGS=-mod=mod
mkdir -p "$out"
go build -o "$out/provider" ./cmd/provider
go build -o "$out/consumer" ./cmd/consumer
go build -o "$out/userservice" ./cmd/userservice
