"""Generate the Python modules for protos/ into examples/generated/ (reproducible, idempotent).

protos/etcd/ is not a demo: it is etcd's API, vendored for the etcd store and compiled into the
package by scripts/gen_etcd_api.py, so it is skipped here.

Run by the README commands and by the test suite's conftest, so a fresh clone needs no hand
step. Output is regenerated only when a .proto is newer than its generated module.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTOS = ROOT / "protos"
OUT = ROOT / "examples" / "generated"


def generate() -> Path:
    """Generate every stale module; returns the directory to put on ``sys.path``."""
    from grpc_tools import protoc  # dev dependency: only needed to (re)generate

    OUT.mkdir(parents=True, exist_ok=True)
    for proto in sorted(PROTOS.rglob("*.proto")):
        rel = proto.relative_to(PROTOS)
        if rel.parts[0] == "etcd":
            continue
        target = OUT / rel.with_name(rel.stem + "_pb2_grpc.py")
        if target.exists() and target.stat().st_mtime >= proto.stat().st_mtime:
            continue
        code = protoc.main(
            [
                "grpc_tools.protoc",
                f"-I{PROTOS}",
                f"--python_out={OUT}",
                f"--pyi_out={OUT}",
                f"--grpc_python_out={OUT}",
                str(proto),
            ]
        )
        if code != 0:
            raise SystemExit(f"protoc failed for {proto} (exit {code})")
    return OUT


if __name__ == "__main__":
    print(generate())
    sys.exit(0)
