#!/usr/bin/env bash
# build.sh OUT: compile the launcher into OUT/classes and copy its dependencies into OUT/lib.
set -euo pipefail
out="$1"
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$out"
mvn -q -B -f "$here/pom.xml" -DbuildDirectory="$out/target" compile \
    org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$out/lib"
rm -rf "$out/classes"
cp -r "$here/target/classes" "$out/classes"
