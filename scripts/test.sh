#!/usr/bin/env bash
# Everything the test suite needs on a fresh machine, then the suite itself.
set -euo pipefail
cd "$(dirname "$0")/.."
# ZooKeeper (Debian's package; Java is on the machine) and etcd (Debian's etcd-server) for the
# registry tests, openssl for the TLS tests' throwaway certificates, Chromium and its WebDriver
# for the console's browser tests, iptables for the network-fault tests (tests/support/netfault.py).
need=()
dpkg -s zookeeper >/dev/null 2>&1 || need+=(zookeeper)
dpkg -s etcd-server >/dev/null 2>&1 || need+=(etcd-server)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v chromedriver >/dev/null 2>&1 || need+=(chromium-driver)
command -v iptables >/dev/null 2>&1 || need+=(iptables)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
bash scripts/install_checkout.sh dev
python3 scripts/gen_protos.py >/dev/null
# The Java (Dubbo 3.3) and Go (dubbo-go 3.3) peers of the live-estate tests, cached by source
# hash; Maven Central and the Go module proxy on a cold machine (tests/support/peers.py).
python3 scripts/build_peers.py
ruff check dubbo_py tests examples bench scripts
mypy dubbo_py
# The built sdist and wheel, installed alone in a fresh virtual environment (see the script).
bash scripts/wheel_smoke.sh
python3 -m pytest -q --durations=15 "$@"
