"""Test-session setup shared by every test directory: generated demo protos on sys.path."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "scripts"))

from gen_protos import generate  # noqa: E402

sys.path.insert(0, str(generate()))
