#!/usr/bin/env bash
# Builds the Java live-estate peer into OUT (OUT/classes and OUT/lib/*.jar).
# Offline first (a warm ~/.m2 needs no network), then online for what is missing.
set -euo pipefail
out=${1:?usage: build.sh OUT}
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
goals=(-B package dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=target/lib -DskipTests)
if ! mvn -q -o "${goals[@]}"; then
  echo "build.sh: offline build failed; trying online" >&2
  mvn -q "${goals[@]}"
fi
mkdir -p "$out"
rm -rf "$out/classes" "$out/lib"
cp -r target/classes "$out/classes"
cp -r target/lib "$out/lib"
