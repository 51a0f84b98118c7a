#!/usr/bin/env python3
"""Differential run: generated routing cases through Apache Dubbo 3.3.6's routers and dubbo-py's.

    PYTHONPATH=$PWD python3 scripts/differential_routers.py 100000 --seed 1 \
        --kinds condition,tag,affinity,configurator --out /tmp/router-diffs

Each case (tests/support/router_cases.py) is answered by the Java oracle
(tests/peers/java/oracle, one JVM) and by dubbo-py (tests/support/router_oracle.py). Prints
cases/s, the totals and the differences by kind and category; each differing case is written
to OUT/<kind>-<n>.json with both answers. Differences dubbo-py makes on purpose
(docs/design.md §8) are counted apart as ``documented`` and are not failures; the exit status
is 1 when any other difference was found.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support import router_cases  # noqa: E402
from tests.support.router_oracle import (  # noqa: E402
    JavaOracle,
    compare,
    documented,
    dubbo_py_answer,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("cases", nargs="?", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--kinds", default=",".join(router_cases.KINDS))
    parser.add_argument("--out", type=Path, default=Path("/tmp/router-diffs"))
    parser.add_argument("--batch", type=int, default=2000)
    args = parser.parse_args()
    kinds = [k for k in args.kinds.split(",") if k]
    args.out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    seen: Counter[tuple[str, str]] = Counter()
    explained: Counter[tuple[str, str]] = Counter()
    per_kind: Counter[str] = Counter()
    written = 0
    started = time.monotonic()
    done = 0
    with JavaOracle.start() as oracle:
        while done < args.cases:
            batch = [
                router_cases.case(rng, kinds[(done + i) % len(kinds)])
                for i in range(min(args.batch, args.cases - done))
            ]
            for case, java in zip(batch, oracle.ask(batch), strict=True):
                per_kind[case["kind"]] += 1
                python = dubbo_py_answer(case)
                category = compare(java, python)
                if category is None:
                    continue
                reason = documented(case, java, python)
                if reason is not None:
                    explained[(case["kind"], reason)] += 1
                    continue
                seen[(case["kind"], category)] += 1
                written += 1
                record = {"case": case, "java": java, "dubbo_py": python, "category": category}
                path = args.out / f"{case['kind']}-{written}.json"
                path.write_text(json.dumps(record, indent=2) + "\n")
            done += len(batch)
            elapsed = time.monotonic() - started
            print(
                f"{done} cases, {done / elapsed:.0f} cases/s, {sum(seen.values())} differences",
                file=sys.stderr,
                flush=True,
            )
    elapsed = time.monotonic() - started
    print(f"seed {args.seed}: {done} cases in {elapsed:.1f} s ({done / elapsed:.0f} cases/s)")
    for kind in kinds:
        print(f"  {kind}: {per_kind[kind]} cases")
    print(f"unexplained differences: {sum(seen.values())}")
    for (kind, category), count in sorted(seen.items()):
        print(f"  {kind}: {category}: {count}")
    print(f"documented differences (docs/design.md §8): {sum(explained.values())}")
    for (kind, reason), count in sorted(explained.items()):
        print(f"  {kind}: {reason}: {count}")
    if written:
        print(f"differing cases written to {args.out}")
    return 1 if seen else 0


if __name__ == "__main__":
    sys.exit(main())
