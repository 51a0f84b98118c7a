"""The runnable examples run, as a user would start them, and do what their docs say."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_asyncio_shop_example() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "asyncio" / "shop.py")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    spread = re.search(r"20 concurrent calls: \{'([\d.:]+)': (\d+), '([\d.:]+)': (\d+)\}", out)
    assert spread, out
    assert int(spread[2]) + int(spread[4]) == 20 and spread[1] != spread[3]
    assert "stream: ['#0 s', '#1 s', '#2 s']" in out
    assert "2.0.0 (mocked): busy, try later" in out
    survivor = re.search(r"after one provider stopped: 10 calls answered by \['([\d.:]+)'\]", out)
    assert survivor and survivor[1] in (spread[1], spread[3]), out
