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
# Nacos's RpcAckCallbackSynchronizer (every server push waits on it for the client's ack) needs
# com.alipay.hessian.clhm from SOFA hessian, which the pom excludes because its com.caucho
# classes shadow hessian 4: take that one package out of it. Without it the server sent no
# config-change or service-change push at all (remote-core.log: NoClassDefFoundError).
mvn -q -B -f "$here/pom.xml" org.apache.maven.plugins:maven-dependency-plugin:3.6.1:unpack \
    -Dartifact=com.alipay.sofa:hessian:3.3.6 -DoutputDirectory="$out/classes" \
    -Dmdep.unpack.includes='com/alipay/hessian/clhm/**'
