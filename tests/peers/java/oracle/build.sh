#!/usr/bin/env bash
# Build the router oracle into OUT: OUT/classes (oracle.RouterOracle) and OUT/lib/*.jar
# (org.apache.dubbo:dubbo:3.3.6 and what it needs). Maven offline first (~/.m2 is usually
# warm), online when something is missing.
set -euo pipefail
out=${1:?usage: build.sh OUT}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$here/pom.xml" "$here/src" "$work/"
cd "$work"
goals=(-q -B compile dependency:copy-dependencies -DincludeScope=runtime "-DoutputDirectory=$out/lib")
if ! mvn -o "${goals[@]}"; then
  echo "offline build failed; trying with Maven Central" >&2
  mvn "${goals[@]}"
fi
rm -rf "$out/classes"
cp -r target/classes "$out/classes"
