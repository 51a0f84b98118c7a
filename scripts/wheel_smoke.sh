#!/usr/bin/env bash
# The built distribution, on its own: build the sdist and the wheel (`python -m build`, the wheel
# made from the sdist), check them (`twine check --strict`), install the wheel into a fresh
# virtual environment (no system site-packages, no PYTHONPATH) and, from a temporary directory
# outside the source tree, run what a new user runs first: `dubbo-py --version`, a provider and a
# consumer on the embedded registry (modules generated there with grpc_tools from a small proto),
# `dubbo-py providers`, and a `route test` scenario with a condition rule (the lark grammar) and
# a Starlark script rule (the sandbox worker). Nothing is imported from the source tree.
#
# Run by scripts/test.sh. Needs `build` and `twine` (the dev extras); without them it makes a
# throwaway environment for them. PYTHON names the interpreter to test with (default python3).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
python=$(command -v "${PYTHON:-python3}")  # absolute: PATH gets the new venv further down
work=$(mktemp -d "${TMPDIR:-/tmp}/dubbo-wheel-smoke.XXXXXX")
log="$work/log"
provider=""
cleanup() {
  if [ -n "$provider" ]; then kill "$provider" 2>/dev/null || true; fi
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
started=$SECONDS

step() { echo "wheel smoke: $* [$((SECONDS - started)) s]"; }
fail() {
  echo "wheel smoke FAILED: $*" >&2
  tail -n 40 "$log" >&2 || true
  exit 1
}
# Run a command with its output in the log; on failure show the log's tail.
quiet() { "$@" >>"$log" 2>&1 || fail "$*"; }
# A fresh virtual environment at $1 with the requirements that follow. Made without pip and
# filled by this pip (`pip --python`, pip 22.3+) without byte-compiling: on a loaded 2-core
# machine ensurepip and compiling every installed module took most of a minute each.
pip_help=$("$python" -m pip --help 2>/dev/null || true)
make_venv() {
  local dir=$1
  shift
  if [[ $pip_help == *"--python <python>"* ]]; then
    quiet "$python" -m venv --without-pip "$dir"
    quiet "$python" -m pip --python "$dir/bin/python" install -q --no-compile "$@"
  else
    quiet "$python" -m venv "$dir"
    quiet "$dir/bin/python" -m pip install -q --no-compile "$@"
  fi
}

# ---- build and check --------------------------------------------------------------------------
tools=$python
if ! "$python" -c 'import build, twine' 2>/dev/null; then
  step "build/twine not installed here: a throwaway environment for them"
  make_venv "$work/tools" build twine
  tools=$work/tools/bin/python
fi
# Build from a copy of the tree's files (tracked, and new ones not ignored): a build in the tree
# itself would read a stale *.egg-info/SOURCES.txt left by an earlier build and ship files that
# pyproject.toml no longer asks for.
copy=$work/src
mkdir -p "$copy"
if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  (cd "$src" && git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
    tar --null -T - -cf -) | tar -xf - -C "$copy"
else
  tar -C "$src" --exclude='*.egg-info' --exclude=build --exclude=dist --exclude=__pycache__ \
    --exclude=.git -cf - . | tar -xf - -C "$copy"
fi
(cd "$copy" && find dubbo_py -type f -not -path '*/__pycache__/*' -not -name '*.pyc') \
  >"$work/package-files"
quiet "$tools" -m build --outdir "$work/dist" "$copy"
wheels=("$work"/dist/*.whl)
sdists=("$work"/dist/*.tar.gz)
[ ${#wheels[@]} -eq 1 ] && [ ${#sdists[@]} -eq 1 ] || fail "expected one wheel and one sdist"
wheel=${wheels[0]}
quiet "$tools" -m twine check --strict "$wheel" "${sdists[0]}"
step "built and checked $(basename "${sdists[0]}") and $(basename "$wheel")"

# Every file of the package that is not Python source (grammars, py.typed, static files) must be
# in the wheel, and so must the licence files and the entry point.
"$python" - "$wheel" "$work/package-files" <<'PY' || fail "the wheel lacks files (above)"
import sys, zipfile
wheel, listing = sys.argv[1], sys.argv[2]
names = set(zipfile.ZipFile(wheel).namelist())
wanted = [line.strip() for line in open(listing) if line.strip()]
missing = [f for f in wanted if f not in names]
info = [n for n in names if ".dist-info/" in n]
for need in ("licenses/LICENSE", "licenses/NOTICE", "entry_points.txt"):
    if not any(n.endswith(need) for n in info):
        missing.append(f"*.dist-info/{need}")
entry = next(n for n in info if n.endswith("entry_points.txt"))
if "dubbo-py = dubbo_py.admin.cli:main" not in zipfile.ZipFile(wheel).read(entry).decode():
    missing.append("the dubbo-py console script")
for name in missing:
    print(f"missing from the wheel: {name}", file=sys.stderr)
sys.exit(1 if missing else 0)
PY

# ---- a fresh environment with the wheel, used from a directory outside the source tree --------
venv=$work/venv
# Only the wheel: nothing from the caller's PYTHONPATH, user site or data directories.
unset PYTHONPATH PYTHONHOME PYTHONSTARTUP VIRTUAL_ENV
export PYTHONNOUSERSITE=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
export XDG_DATA_HOME="$work/data" XDG_CACHE_HOME="$work/cache" XDG_CONFIG_HOME="$work/config"
export DUBBO_PY_REGISTRY="sqlite://$work/registry.db"
make_venv "$venv" "$wheel[examples]"
export PATH="$venv/bin:$PATH"
app=$work/app
mkdir -p "$app/demo"
cd "$app"

"$venv/bin/python" - "$src" "$venv" <<'PY' || fail "dubbo_py does not come from the wheel"
import importlib.metadata, importlib.resources, os, sys
src, venv = (os.path.realpath(p) for p in sys.argv[1:3])
import dubbo_py
where = os.path.realpath(dubbo_py.__file__)
assert where.startswith(venv + os.sep), f"dubbo_py imported from {where}, not {venv}"
assert not any(os.path.realpath(p or ".").startswith(src) for p in sys.path), sys.path
assert importlib.metadata.version("dubbo-grpc") == dubbo_py.__version__
assert importlib.resources.files("dubbo_py").joinpath("py.typed").is_file()
import importlib.util  # a clean environment: the test tools of the caller's are not in it
assert importlib.util.find_spec("pytest") is None, "pytest is importable: not a clean venv"
PY
expected=$("$venv/bin/python" -c 'import dubbo_py; print(dubbo_py.__version__)')
[ "$(basename "$wheel")" = "dubbo_grpc-$expected-py3-none-any.whl" ] || fail "wheel name vs $expected"
version=$(dubbo-py --version)
[ "$version" = "dubbo-py, version $expected" ] || fail "dubbo-py --version printed: $version"
step "installed in a fresh venv: $version (dubbo_py from the venv, py.typed present)"

# ---- a provider and a consumer on the embedded registry ---------------------------------------
cat >demo/greeter.proto <<'PROTO'
syntax = "proto3";
package demo;
service Greeter {
  rpc SayHello (HelloRequest) returns (HelloReply);
}
message HelloRequest { string name = 1; }
message HelloReply { string message = 1; }
PROTO
quiet python -m grpc_tools.protoc -I. --python_out=. --grpc_python_out=. demo/greeter.proto

cat >provider.py <<'PY'
import dubbo_py
from demo import greeter_pb2, greeter_pb2_grpc

@dubbo_py.service(version="1.0.0")
class Greeter(greeter_pb2_grpc.GreeterServicer):
    def SayHello(self, request, context):
        return greeter_pb2.HelloReply(message=f"Hello, {request.name}!")

dubbo_py.Application("greeter-provider").serve(Greeter(), port=0, grace=1.0)
PY
cat >consumer.py <<'PY'
import dubbo_py
from demo import greeter_pb2, greeter_pb2_grpc

with dubbo_py.Application("shop") as app:
    greeter = app.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0", retries=2, timeout=5.0)
    replies = [greeter.SayHello(greeter_pb2.HelloRequest(name=f"ada-{i}")).message for i in range(5)]
assert replies == [f"Hello, ada-{i}!" for i in range(5)], replies
print("consumer: 5 calls answered")
PY
python provider.py >"$work/provider.log" 2>&1 &
provider=$!
listed=""
for _ in $(seq 150); do
  if listed=$(dubbo-py --json providers demo.Greeter 2>/dev/null) && [ "$listed" != "[]" ]; then
    break
  fi
  kill -0 "$provider" 2>/dev/null || { cat "$work/provider.log" >>"$log"; fail "provider exited"; }
  listed=""
  sleep 0.2
done
[ -n "$listed" ] || { cat "$work/provider.log" >>"$log"; fail "provider never registered"; }
python - "$listed" <<'PY' || fail "dubbo-py providers: unexpected listing"
import json, sys
rows = json.loads(sys.argv[1])
# One provider, one row, with the levels it registered at (interface and application, Dubbo
# 3's default register mode); the first look may catch it at one level only.
assert len(rows) == 1, rows
levels = rows[0]["levels"]
assert levels and len(levels) == len(set(levels)), rows
assert set(levels) <= {"interface", "application"}, rows
assert all(r["application"] == "greeter-provider" and r["version"] == "1.0.0" for r in rows), rows
PY
python consumer.py >>"$log" 2>&1 || fail "consumer"
# `dubbo-py call` reads the types from the provider's reflection; the console serves its pages
# and its static files from the installed package.
called=$(dubbo-py call demo.Greeter SayHello '{"name": "bo"}' --version 1.0.0 --json) ||
  fail "dubbo-py call: $called"
python - "$called" <<'PY' || fail "dubbo-py call: unexpected reply $called"
import json, sys
out = json.loads(sys.argv[1])
assert out["reply"] == {"message": "Hello, bo!"} and out["provider"], out
PY
python - <<'PY' >>"$log" 2>&1 || fail "dubbo-py console did not serve its pages"
import subprocess, urllib.request
console = subprocess.Popen(["dubbo-py", "console", "--port", "0"], stdout=subprocess.PIPE, text=True)
try:
    url = console.stdout.readline().split()[2]
    for path in ("", "static/htmx.min.js", "service/demo.Greeter", "rules"):
        with urllib.request.urlopen(url + path, timeout=30) as response:
            assert response.status == 200, (path, response.status)
finally:
    console.terminate()
    console.wait(15)
PY
kill -TERM "$provider"
wait "$provider" || { cat "$work/provider.log" >>"$log"; fail "provider did not stop cleanly"; }
provider=""
step "provider and consumer on the embedded registry: 5 calls answered, dubbo-py call and console work, SIGTERM stopped it"

# ---- route test: a condition rule (the lark grammar) and a script rule (the sandbox) -----------
cat >scenario.yaml <<'YAML'
consumer: consumer://10.0.0.1/demo.Greeter?application=shop
invocation:
  method: SayHello
providers:
  - tri://10.0.0.5:50051/demo.Greeter?version=1.0.0&region=eu
  - tri://10.0.0.6:50051/demo.Greeter?version=1.0.0&region=us
  - tri://10.0.0.7:50051/demo.Greeter?version=2.0.0&region=eu
rules:
  - condition: "method = SayHello => version = 1.0.0"
  - config: script-router
    yaml: |
      key: demo.Greeter
      type: starlark
      script: |
        def route(invokers, invocation, context):
            return [i for i in invokers if i.parameters.get("region") == "eu"]
YAML
routed=$(dubbo-py route test scenario.yaml --json) || fail "route test: $routed"
python - "$routed" <<'PY' || fail "route test: unexpected result $routed"
import json, sys
result = json.loads(sys.argv[1])
assert result["error"] is None, result
assert result["providers"] == ["tri://10.0.0.5:50051/demo.Greeter?version=1.0.0&region=eu"], result
routers = [entry["router"] for entry in result["trace"]]
assert any(r.startswith("condition") for r in routers) and any(r.startswith("script") for r in routers), routers
PY
step "route test: condition and script rules leave the one expected provider"
step "ok"
