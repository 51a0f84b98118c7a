"""Two Greeter servers in one process, one recording dubbo-py's provider metrics and one not,
for ``bench/bench_metrics.py``: both share this process's CPU and GIL, so running them side by
side measures what the metrics cost and nothing else.

    python bench/metrics_provider.py REGISTRY     # prints: READY <plain address> <measured address>
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "examples" / "quickstart"))
import _paths  # noqa: E402,F401
from provider import make_greeter  # noqa: E402

import dubbo_py  # noqa: E402


def main() -> None:
    registry = sys.argv[1]
    plain_app = dubbo_py.Application("bench-plain", registry, metrics=False)
    measured_app = dubbo_py.Application("bench-measured", registry, metrics=True)
    plain = plain_app.start(make_greeter("1.0.0", None, None), port=0)
    measured = measured_app.start(make_greeter("1.0.0", None, None), port=0)
    print(f"READY {plain.address} {measured.address}", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
