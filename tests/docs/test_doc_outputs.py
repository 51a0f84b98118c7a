"""Command output shown in docs/ is what the commands print today: the blocks marked
``<!-- generated: ... -->`` are rerun by scripts/regen_doc_outputs.py in check mode."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_documented_outputs_are_current() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "regen_doc_outputs.py"), "--check"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_generated_blocks_exist() -> None:
    # A marker that stopped matching (a renamed block) must not make the check vacuous.
    pages = {p.name: p.read_text(encoding="utf-8") for p in (ROOT / "docs").glob("*.md")}
    assert pages["cli.md"].count("<!-- generated: ") >= 4
    assert "<!-- generated: example:examples/asyncio/shop.py -->" in pages["quickstart.md"]
