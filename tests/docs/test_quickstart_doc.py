"""docs/quickstart.md can be followed for one's own service: its .proto compiles with the command
it gives, its code uses the embedded default registry, and it points to the tutorial."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "quickstart.md").read_text(encoding="utf-8")


def blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```$", DOC, re.S | re.M)


def test_the_proto_compiles_with_the_command_shown(tmp_path: Path) -> None:
    (proto,) = blocks("proto")
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "greeter.proto").write_text(proto, encoding="utf-8")
    (command,) = [ln for b in blocks("bash") for ln in b.splitlines() if "grpc_tools.protoc" in ln]
    assert command.startswith("python -m grpc_tools.protoc ")
    args = command.split()[1:]
    done = subprocess.run(
        [sys.executable, *args], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    check = (
        "from demo import greeter_pb2, greeter_pb2_grpc\n"
        "s = greeter_pb2.DESCRIPTOR.services_by_name['Greeter']\n"
        "print(sorted(m.name for m in s.methods), greeter_pb2.HelloRequest(name='a', count=3))\n"
        "greeter_pb2_grpc.GreeterServicer, greeter_pb2_grpc.GreeterStub\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", check], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert ran.returncode == 0, ran.stderr
    assert "['SayHello', 'SayHelloStream']" in ran.stdout


def test_the_code_uses_the_embedded_default_and_links_the_tutorial() -> None:
    code = "\n".join(blocks("python"))
    assert "dubbo_py.Application(" in code
    assert "zookeeper://" not in code
    assert not re.search(r"Application\([^)]*registry=", code)
    assert "](tutorial.md)" in DOC
    assert re.search(r"pip install '?dubbo-grpc", DOC)
