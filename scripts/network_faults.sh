#!/usr/bin/env bash
# Network faults at production-like lengths: the figures of docs/failure-modes.md.
#
# The default suite runs every scenario with 2 s registry sessions and faults of a few seconds
# (tests/e2e/test_network_faults.py); this runs the same tests with 10 s sessions (dubbo-py's
# default ZooKeeper session timeout and etcd lease) and the lengths of issue 33's report, every
# (registry, discovery level) pair, and the 3-member ZooKeeper ensemble and etcd cluster
# partitions (tests/e2e/test_cluster_partitions.py). Each test prints its figures (calls, failed
# calls, time to recover). Needs root and iptables (apt-get install iptables), like the suite.
#
#   scripts/network_faults.sh              # everything (about 12 minutes)
#   scripts/network_faults.sh cut          # the providers cut off from the registry for 40 s
#   scripts/network_faults.sh cut-off      # the same with empty protection off (calls fail)
#   scripts/network_faults.sh provider     # a provider blackholed / resetting / one-way, 15 s
#   scripts/network_faults.sh registry     # the registry blackholed for 45 s
#   scripts/network_faults.sh cluster      # one member of 3 partitioned for 20 s
#   scripts/network_faults.sh nacos        # the Nacos server killed -9 and restarted under load
#
# The iptables chain of each test (dpy-<pid>-<n>) is removed when it ends; `iptables -S` after
# a run shows none left.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export DUBBO_PY_LONG_FAULTS=1
run() {
  python3 -m pytest -q -s -p no:cacheprovider "$@" | grep -E '^\[|^  e\.g\.|passed|failed|skipped' || true
}
what="${1:-all}"
if [[ $what == all || $what == cut ]]; then
  DUBBO_PY_FAULT_SESSION_MS=10000 DUBBO_PY_FAULT_SECONDS=40 \
    run tests/e2e/test_network_faults.py -k cut_off
fi
if [[ $what == all || $what == cut-off ]]; then
  # Expected to fail: what the consumer goes through without empty protection.
  DUBBO_PY_FAULT_EMPTY_PROTECTION=false DUBBO_PY_FAULT_SESSION_MS=10000 DUBBO_PY_FAULT_SECONDS=40 \
    run tests/e2e/test_network_faults.py -k "cut_off and zookeeper and FORCE_INTERFACE"
fi
if [[ $what == all || $what == provider ]]; then
  DUBBO_PY_FAULT_SECONDS=15 run tests/e2e/test_network_faults.py -k left_and_taken_back
fi
if [[ $what == all || $what == registry ]]; then
  DUBBO_PY_FAULT_SESSION_MS=10000 DUBBO_PY_FAULT_SECONDS=45 \
    run tests/e2e/test_network_faults.py -k blackholed_past
fi
if [[ $what == all || $what == cluster ]]; then
  DUBBO_PY_FAULT_SESSION_MS=10000 DUBBO_PY_FAULT_SECONDS=20 \
    run tests/e2e/test_cluster_partitions.py
fi
if [[ $what == all || $what == nacos ]]; then
  # The Nacos server killed -9 and restarted under load (its restart alone takes ~25 s here).
  DUBBO_PY_LONG_FAULTS=1 run tests/e2e/test_nacos_faults.py
fi
echo "iptables chains left behind: $(iptables -S | grep -c -- '-N dpy-' || true)"
