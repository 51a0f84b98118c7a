"""A throwaway CA with a server and a client certificate, made with the openssl CLI."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Certs:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _run(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certs(directory: Path) -> Certs:
    """A CA, a server certificate for 127.0.0.1/localhost and a client certificate (1 day)."""
    d = directory
    _run(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "1",
        "-subj",
        "/CN=dubbo-py test CA",
        cwd=d,
    )
    for name, san in (("server", "subjectAltName=IP:127.0.0.1,DNS:localhost"), ("client", "")):
        _run(
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            f"{name}.key",
            "-out",
            f"{name}.csr",
            "-subj",
            f"/CN={name}",
            cwd=d,
        )
        ext = d / f"{name}.ext"
        ext.write_text(san or "basicConstraints=CA:FALSE")
        _run(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            f"{name}.pem",
            "-days",
            "1",
            "-extfile",
            ext.name,
            cwd=d,
        )
    return Certs(
        d / "ca.pem", d / "server.pem", d / "server.key", d / "client.pem", d / "client.key"
    )
