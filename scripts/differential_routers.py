#!/usr/bin/env python3
"""Differential run: generated routing cases through Dubbo's (or dubbo-go's) routers and dubbo-py's.

    PYTHONPATH=$PWD python3 scripts/differential_routers.py 100000 --seed 1 \
        --kinds condition,tag,affinity,configurator --out /tmp/router-diffs
    PYTHONPATH=$PWD python3 scripts/differential_routers.py 210000 --oracle go --seed 1 \
        --kinds condition,tag,affinity
    PYTHONPATH=$PWD python3 scripts/differential_routers.py 100000 --oracle go --seed 3 \
        --kinds condition,affinity --explicit-flags
    PYTHONPATH=$PWD python3 scripts/differential_routers.py 50000 --oracle go --seed 2 \
        --kinds configurator
    PYTHONPATH=$PWD python3 scripts/differential_routers.py 30000 --oracle go --seed 4 \
        --kinds configurator --explicit-flags
    PYTHONPATH=$PWD python3 scripts/differential_routers.py 50000 --seed 1 \
        --kinds consumer-configurator

Each case (tests/support/router_cases.py) is answered by the oracle — ``--oracle java``
(default): Apache Dubbo 3.3.6 (tests/peers/java/oracle, one JVM); ``--oracle go``: dubbo-go
3.3.2's condition, tag and affinity routers and its configurators (tests/peers/go/oracle) — and by
dubbo-py (tests/support/router_oracle.py). The consumer-configurator kind (Java only) runs only
when named in ``--kinds``. Prints cases/s, the totals and the differences by
kind and category; each differing case is written to OUT/<kind>-<n>.json with both answers.
Differences written down (Java: dubbo-py's deliberate ones, docs/design.md §8; Go: dubbo-go's
own behaviour, tests/support/go_router_differences.py) are counted apart as ``documented`` and
are not failures; the exit status is 1 when any other difference was found.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support import go_router_differences, router_cases  # noqa: E402
from tests.support.router_oracle import (  # noqa: E402
    GO_KINDS,
    GoOracle,
    JavaOracle,
    LineOracle,
    compare,
    documented,
    dubbo_py_answer,
)

#: Per oracle: how it starts, the name its answers carry, the kinds it answers, and what
#: explains a difference.
ORACLES = {
    "java": (
        JavaOracle.start,
        "java",
        (*router_cases.KINDS, *router_cases.EXTRA_KINDS),
        documented,
    ),
    "go": (GoOracle.start, "dubbo-go", GO_KINDS, go_router_differences.documented),
}


_CONFIGS = re.compile(r"^configs:$", re.MULTILINE)
_ITEM = re.compile(r"^  - side: .*\n(?:    .*\n)*", re.MULTILINE)


def with_explicit_flags(case: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """router_cases.with_explicit_flags, and for a configurators document its ``enabled`` and
    that of each typed item written out when missing (dubbo-go 3.3.2 reads them as false:
    docs/compatibility.md), drawn true two times in three."""
    if case["kind"] != "configurator":
        return router_cases.with_explicit_flags(case, rng)
    rule = case["rule"]

    def drawn() -> str:
        return rng.choice(("true", "true", "false"))

    if not re.search(r"^enabled: ", rule, re.MULTILINE):
        rule = _CONFIGS.sub(lambda _: f"enabled: {drawn()}\nconfigs:", rule, count=1)

    def item(found: re.Match[str]) -> str:
        text = found.group(0)
        typed = re.search(r"^    type: (.*)$", text, re.MULTILINE)
        if typed is None or typed.group(1) == "general" or "\n    enabled: " in text:
            return text
        return text.replace("    parameters:\n", f"    enabled: {drawn()}\n    parameters:\n", 1)

    rule = _ITEM.sub(item, rule)
    return {**case, "rule": rule}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("cases", nargs="?", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--oracle", choices=sorted(ORACLES), default="java")
    parser.add_argument(
        "--kinds",
        help="comma-separated (default: every kind the oracle answers but consumer-configurator)",
    )
    parser.add_argument(
        "--explicit-flags",
        action="store_true",
        help="write out configVersion, force and enabled of every condition and affinity"
        " document (router_cases.with_explicit_flags) and enabled of every configurators"
        " document and typed item: more cases reach dubbo-go's matchers",
    )
    parser.add_argument("--out", type=Path, default=Path("/tmp/router-diffs"))
    parser.add_argument("--batch", type=int, default=2000)
    args = parser.parse_args()
    start, name, supported, explain = ORACLES[args.oracle]
    # Without --kinds, the kinds of the recorded default runs (router_cases.EXTRA_KINDS only
    # when named).
    default = ",".join(k for k in supported if k not in router_cases.EXTRA_KINDS)
    kinds = [k for k in (args.kinds or default).split(",") if k]
    unanswered = [k for k in kinds if k not in supported]
    if unanswered:
        parser.error(f"the {args.oracle} oracle does not answer {', '.join(unanswered)}")
    args.out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    seen: Counter[tuple[str, str]] = Counter()
    explained: Counter[tuple[str, str]] = Counter()
    per_kind: Counter[str] = Counter()
    #: What the oracle answered, by kind: routed (kept), refused (error) or panicked.
    answered: Counter[tuple[str, str]] = Counter()
    written = 0
    started = time.monotonic()
    done = 0
    oracle: LineOracle
    with start() as oracle:
        while done < args.cases:
            batch = [
                router_cases.case(rng, kinds[(done + i) % len(kinds)])
                for i in range(min(args.batch, args.cases - done))
            ]
            if args.explicit_flags:
                batch = [with_explicit_flags(case, rng) for case in batch]
            for case, theirs in zip(batch, oracle.ask(batch), strict=True):
                per_kind[case["kind"]] += 1
                shape = next(
                    (k for k in ("kept", "consumer", "urls", "error", "panic") if k in theirs), "?"
                )
                answered[(case["kind"], shape)] += 1
                python = dubbo_py_answer(case)
                category = compare(theirs, python, name)
                if category is None:
                    continue
                reason = explain(case, theirs, python)
                if reason is not None:
                    explained[(case["kind"], reason)] += 1
                    continue
                seen[(case["kind"], category)] += 1
                written += 1
                record = {"case": case, name: theirs, "dubbo_py": python, "category": category}
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
    rate = done / elapsed
    print(
        f"{args.oracle} oracle, seed {args.seed}:"
        f" {done} cases in {elapsed:.1f} s ({rate:.0f} cases/s)"
    )
    for kind in kinds:
        shapes = ", ".join(f"{k} {n}" for (c, k), n in sorted(answered.items()) if c == kind)
        print(f"  {kind}: {per_kind[kind]} cases ({name} answered: {shapes})")
    print(f"unexplained differences: {sum(seen.values())}")
    for (kind, category), count in sorted(seen.items()):
        print(f"  {kind}: {category}: {count}")
    where = "docs/design.md §8" if args.oracle == "java" else "docs/compatibility.md"
    print(f"documented differences ({where}): {sum(explained.values())}")
    for (kind, reason), count in sorted(explained.items()):
        print(f"  {kind}: {reason}: {count}")
    if written:
        print(f"differing cases written to {args.out}")
    return 1 if seen else 0


if __name__ == "__main__":
    sys.exit(main())
