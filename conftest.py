"""Test-session setup shared by every test directory: generated demo protos on sys.path."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "scripts"))

from gen_protos import generate  # noqa: E402

sys.path.insert(0, str(generate()))

# Hypothesis' per-example deadline (200 ms) is a timed assertion: on a loaded 2-core machine a
# parser example can take longer without anything being wrong. Speed is the benchmarks' job.
from hypothesis import settings  # noqa: E402

settings.register_profile("dubbo-py", deadline=None)
settings.load_profile("dubbo-py")
