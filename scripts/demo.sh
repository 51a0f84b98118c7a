#!/usr/bin/env bash
# The quick-start demo on the embedded registry (no server to start): two provider processes and
# a consumer; calls spread over both; one provider is killed mid-run and calls continue.
set -euo pipefail
cd "$(dirname "$0")/.."
PIP_ROOT_USER_ACTION=ignore python3 -m pip install -q -e '.[examples]'
python3 scripts/gen_protos.py >/dev/null

work=$(mktemp -d)
registry="sqlite://$work/registry.db"
export DUBBO_PY_REGISTRY="$registry"
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

start_provider() {
  python3 examples/quickstart/provider.py >"$work/$1.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do grep -q READY "$work/$1.log" && return 0; sleep 0.1; done
  echo "provider $1 did not start:"; cat "$work/$1.log"; exit 1
}
start_provider p1
start_provider p2
echo "== two providers up: $(grep -h READY "$work"/p*.log | cut -d' ' -f2 | paste -sd' ')"

echo "== 200 calls, provider 1 killed (kill -9) after the first second"
python3 examples/quickstart/consumer.py --calls 200 --interval 0.01 &
consumer=$!
sleep 1
{ kill -9 "${pids[0]}"; wait "${pids[0]}"; } 2>/dev/null || true
echo "   (killed provider 1, pid ${pids[0]})"
wait "$consumer"
echo "== the dubbo-py CLI sees what is registered now:"
dubbo-py providers demo.Greeter || true
