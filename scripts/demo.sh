#!/usr/bin/env bash
# The quick-start demo on the embedded registry (no server to start): two provider processes and
# a consumer calling until it is stopped. An operator pushes a routing rule with the dubbo-py CLI
# and the consumer's traffic follows it; the rule is deleted and traffic spreads again; then one
# provider is killed (kill -9) while calls are running and every call still succeeds.
#
# The steps are driven by what the consumer sees, not by sleeps (examples/quickstart/run_demo.py): each
# waits for its effect before the next one, and the demo exits 1 naming an effect not seen within
# DUBBO_PY_DEMO_TIMEOUT seconds (60 by default). DUBBO_PY_DEMO_SKIP_INSTALL=1 skips the install
# (the demo's test runs it in an already installed checkout).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${DUBBO_PY_DEMO_SKIP_INSTALL:-0}" != 1 ]; then
  bash scripts/install_checkout.sh examples
fi
python3 scripts/gen_protos.py >/dev/null
exec python3 examples/quickstart/run_demo.py
