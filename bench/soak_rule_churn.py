"""Soak: rules rewritten every half second and a provider restarting every 10 s, under load.

    python bench/soak_rule_churn.py --seconds 150 --registry zookeeper --flavour blocking
    python bench/soak_rule_churn.py --seconds 150 --registry embedded --flavour both \
        --kinds condition,tag,override
    python bench/soak_rule_churn.py --seconds 20 --kinds condition,blackhole   # sees failures
    python bench/soak_rule_churn.py --seconds 120 --registry nacos   # the test Nacos server
    python bench/soak_rule_churn.py --seconds 60 --registry nacos --apps 100 --workers 1

Starts its own ZooKeeper (or embedded registry, or the test Nacos server), two stable providers
and one that restarts,
a consumer (``--apps`` consumer applications in one process) with ``--workers`` threads or
tasks each calling with a ``tenant`` attachment and a varying
argument, and an operator process rewriting rules straight in the registry (see
``tests/support/churn.py``). Prints the totals, each distinct failure (status and message) with
its count, and the first twenty failed calls with their times; exits 1 if any call failed.
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))
import _paths  # noqa: E402,F401

from tests.support.churn import KINDS, run_churn  # noqa: E402
from tests.support.zookeeper import ZooKeeperServer  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=150.0)
    parser.add_argument(
        "--registry", choices=("zookeeper", "embedded", "nacos"), default="zookeeper"
    )
    parser.add_argument(
        "--flavour", default="blocking", help="blocking, asyncio, or both (one reference each)"
    )
    parser.add_argument("--kinds", default=",".join(KINDS), help="rule kinds to rewrite, in turn")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between pushes")
    parser.add_argument("--restart-every", type=float, default=10.0, help="0: no provider churn")
    parser.add_argument("--workers", type=int, default=4, help="threads or asyncio tasks")
    parser.add_argument(
        "--apps", type=int, default=1, help="consumer applications (each with --workers)"
    )
    parser.add_argument("--timeout", type=float, default=5.0, help="each call's deadline (s)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        zk = ZooKeeperServer() if args.registry == "zookeeper" else None
        nacos = None
        if args.registry == "nacos":
            from tests.support.nacos import NacosServer

            nacos = NacosServer()
        try:
            if zk is not None:
                zk.start()
                registry = f"zookeeper://{zk.address}/soak-{uuid.uuid4().hex[:8]}"
            elif nacos is not None:
                nacos.start()
                # Interface level, as the ZooKeeper soak reads providers; a namespace of its own.
                registry = (
                    f"nacos://{nacos.address}?namespace=soak-{uuid.uuid4().hex[:8]}"
                    "&register-mode=interface"
                )
            else:
                registry = f"sqlite://{tmp}/registry.db"
            result = run_churn(
                registry,
                args.seconds,
                flavours=("blocking", "asyncio") if args.flavour == "both" else (args.flavour,),
                kinds=[k for k in args.kinds.split(",") if k],
                interval=args.interval,
                restart_every=args.restart_every,
                workers=args.workers,
                apps=args.apps,
                timeout=args.timeout,
                cache_dir=Path(tmp),
                log=lambda line: print(f"  {line}", flush=True),
            )
        finally:
            if zk is not None:
                zk.close()
            if nacos is not None:
                nacos.close()
    print(f"{args.registry} {args.flavour}: {result.summary()}")
    kinds = collections.Counter((f.status, f.message) for f in result.failures)
    for (status, message), count in kinds.most_common():
        print(f"  {count} FAILED {status}: {message}")
    for failure in result.failures[:20]:
        print(f"  FAILED at {failure.at:.3f} s: {failure.status}: {failure.message}")
    return 1 if result.failures else 0


if __name__ == "__main__":
    sys.exit(main())
