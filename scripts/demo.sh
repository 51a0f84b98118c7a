#!/usr/bin/env bash
# The quick-start demo on the embedded registry (no server to start): two provider processes and
# a consumer calling steadily. An operator pushes a routing rule with the dubbo-py CLI and the
# consumer's traffic follows it at once; the rule is deleted and traffic spreads again; then one
# provider is killed (kill -9) and every call still succeeds.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_checkout.sh examples
python3 scripts/gen_protos.py >/dev/null

work=$(mktemp -d)
export DUBBO_PY_REGISTRY="sqlite://$work/registry.db"
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
p1=$(cut -d' ' -f2 "$work/p1.log" | head -1)
p2=$(cut -d' ' -f2 "$work/p2.log" | head -1)
echo "== providers up: p1=$p1 p2=$p2"
dubbo-py providers demo.Greeter

echo "== a consumer makes 500 calls (where each 50 landed is printed as it goes)"
python3 examples/quickstart/consumer.py --calls 500 --interval 0.01 --report-every 50 &
consumer=$!
sleep 1.5

cat >"$work/only-p2.yaml" <<YAML
configVersion: v3.0
scope: service
key: demo.Greeter:1.0.0
force: true
conditions:
  - method = SayHello => port = ${p2##*:}
YAML
echo "== operator: dubbo-py rules push only-p2.yaml   (every SayHello to p2)"
dubbo-py rules push "$work/only-p2.yaml"
sleep 1.5
echo "== operator: dubbo-py rules delete (traffic spreads again)"
dubbo-py rules delete "demo.Greeter:1.0.0:.condition-router"
sleep 1.5
{ kill -9 "${pids[0]}"; wait "${pids[0]}"; } 2>/dev/null || true
echo "== killed p1 with kill -9: calls fail over to p2"
wait "$consumer"
