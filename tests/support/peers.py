"""Peers in other languages (Apache Dubbo Java 3.3, dubbo-go 3.3), built once per machine.

Each peer is a folder under ``tests/peers/java/`` or ``tests/peers/go/`` with a ``build.sh``
that takes one argument, the output folder, and leaves there what the peer runs from (a Java
peer: ``classes/`` or ``peer.jar`` and ``lib/``; a Go peer: its binaries). The output folder is
named after a hash of the peer's own files and of the ``.proto`` files it serves, under
``$DUBBO_PY_PEERS_CACHE`` (default ``~/.cache/dubbo-py/peers``): a fresh clone on a machine that
built the same sources before reuses the build, and a changed source builds anew. Maven's and
Go's own caches (``~/.m2``, the Go module cache) keep a rebuild short.

``scripts/build_peers.py`` builds every peer before the suite runs, so a missing tool or
artifact is reported once, with its name, instead of as a time-out inside a test.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PEERS = ROOT / "tests" / "peers"
#: The .proto files the peers serve and call; a change to them rebuilds every peer.
PROTOS = ROOT / "protos" / "demo"
#: What a peer's build needs on the machine, by language.
TOOLS = {"java": ("java", "mvn"), "go": ("go",)}
#: Files in a peer's folder that are build products, not sources.
_IGNORED = {"target", "bin", "gen", ".build"}


class PeerUnavailable(RuntimeError):
    """A peer could not be built: the message names the missing tool or what the build said."""


@dataclass(frozen=True)
class Peer:
    """One built peer: its language, name and the folder its build left."""

    language: str
    name: str
    out: Path

    def java_command(
        self,
        main_class: str,
        *args: str,
        heap: str = "256m",
        extra_classpath: Sequence[Path] = (),
    ) -> list[str]:
        """The ``java`` command line running ``main_class`` from this (Java) peer's build;
        ``extra_classpath`` entries come first (e.g. an SPI listing that switches a router on)."""
        classpath = [
            *extra_classpath,
            self.out / "classes",
            self.out / "peer.jar",
            self.out / "lib" / "*",
        ]
        return [
            "java",
            f"-Xmx{heap}",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Djava.net.preferIPv4Stack=true",
            "-cp",
            os.pathsep.join(str(part) for part in classpath),
            main_class,
            *args,
        ]

    def binary(self, name: str) -> Path:
        """A binary of this (Go) peer's build."""
        return self.out / name


def cache_root() -> Path:
    """Where built peers are kept between runs and clones."""
    configured = os.environ.get("DUBBO_PY_PEERS_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "dubbo-py" / "peers"


def _source_files(folder: Path) -> list[Path]:
    files = []
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if relative.parts and relative.parts[0] in _IGNORED:
            continue
        if path.is_file():
            files.append(path)
    return files


def source_hash(language: str, name: str) -> str:
    """A hash of the peer's sources and of the .proto files: the name of its build."""
    folder = PEERS / language / name
    digest = hashlib.sha256()
    for base in (folder, PROTOS):
        for path in _source_files(base):
            digest.update(str(path.relative_to(ROOT)).encode())
            digest.update(b"\0")
            digest.update(path.read_bytes())
            digest.update(b"\0")
    return digest.hexdigest()[:16]


def all_peers() -> list[tuple[str, str]]:
    """Every peer in the tree, as (language, name)."""
    found = []
    for language in sorted(TOOLS):
        base = PEERS / language
        if base.is_dir():
            found += [
                (language, d.name) for d in sorted(base.iterdir()) if (d / "build.sh").is_file()
            ]
    return found


def ensure_built(language: str, name: str) -> Peer:
    """The peer's build, made now if this machine has not made it from these sources."""
    folder = PEERS / language / name
    if not (folder / "build.sh").is_file():
        raise PeerUnavailable(f"no peer {language}/{name}: {folder}/build.sh is missing")
    out = cache_root() / f"{language}-{name}-{source_hash(language, name)}"
    if (out / ".built").is_file():
        return Peer(language, name, out)
    missing = [tool for tool in TOOLS[language] if shutil.which(tool) is None]
    if missing:
        raise PeerUnavailable(f"peer {language}/{name} needs {', '.join(missing)} on PATH to build")
    out.parent.mkdir(parents=True, exist_ok=True)
    # Built into a temporary folder and renamed, so that a build cut short never passes for one.
    staging = Path(tempfile.mkdtemp(prefix=f".{language}-{name}-", dir=out.parent))
    log = staging.parent / f"{out.name}.log"
    with log.open("w") as sink:
        result = subprocess.run(
            ["bash", str(folder / "build.sh"), str(staging)],
            cwd=folder,
            stdout=sink,
            stderr=subprocess.STDOUT,
            check=False,
        )
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-40:])
        raise PeerUnavailable(
            f"peer {language}/{name} did not build (exit {result.returncode}; log {log}):\n{tail}"
        )
    (staging / ".built").write_text(source_hash(language, name) + "\n")
    if out.exists():  # another process built the same sources meanwhile
        shutil.rmtree(staging, ignore_errors=True)
    else:
        staging.rename(out)
    return Peer(language, name, out)
