"""Make the generated demo modules importable from any example (generating them if needed)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from gen_protos import generate  # noqa: E402

sys.path.insert(0, str(generate()))
