"""Start-up time of ``import dubbo_py`` and of the ``dubbo-py`` CLI, against ``import grpc``.

Each command is a fresh process; its wall-clock time (spawn to exit) is taken ``--runs`` times
and the median kept. The commands are interleaved run by run (``pass``, ``import grpc``, ...,
then again), so a busy moment of the shared machine hits every command alike instead of
inflating one of them. ``python -c "import grpc"`` is the yardstick: a dubbo-py process cannot
start faster than the gRPC it is built on, and the ratio to it is what stays comparable from one
machine (or one load) to another.

The CLI is run as ``python -c "from dubbo_py.admin.cli import main; main()"``, which is what the
``dubbo-py`` console script does (minus the script's own ``import sys, re``), so the figures do
not depend on where the script was installed. ``rules validate`` checks a small condition rule
written to a temporary directory, offline (no registry named: ``$DUBBO_PY_REGISTRY`` is unset).
Every process runs in that directory, so the checkout it is started from is not on its path
ahead of the installed one.

``--baseline DIR`` also measures the dubbo-py commands with another checkout (a ``git
worktree`` or ``git archive`` of an older commit) first on ``PYTHONPATH``, in the same rounds:
a before/after comparison that the machine's load cannot tilt.

    python bench/bench_startup.py [--runs 20] [--baseline /tmp/before]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RULE = """\
configVersion: v3.0
scope: service
key: demo.Greeter:1.0.0
enabled: true
force: false
conditions:
  - method = SayHello => region = hangzhou
  - application = crawler => false
"""

CLI = "from dubbo_py.admin.cli import main; main()"


Command = tuple[str, list[str], dict[str, str]]


def commands(rule_file: Path, env: dict[str, str], baseline: Path | None) -> list[Command]:
    """(label, argv, environment) of every measured command, the yardsticks first."""
    py = [sys.executable]
    dubbo: list[tuple[str, list[str]]] = [
        ('python -c "import dubbo_py"', [*py, "-c", "import dubbo_py"]),
        # what a provider or consumer program starts with: the consumer stack and gRPC
        ("from dubbo_py import Application", [*py, "-c", "from dubbo_py import Application"]),
        ("dubbo-py --version", [*py, "-c", CLI, "--version"]),
        ("dubbo-py rules validate FILE", [*py, "-c", CLI, "rules", "validate", str(rule_file)]),
    ]
    out: list[Command] = [
        ('python -c "pass"', [*py, "-c", "pass"], env),
        ('python -c "import grpc"', [*py, "-c", "import grpc"], env),
    ]
    out += [(label, argv, env) for label, argv in dubbo]
    if baseline is not None:
        old = {**env, "PYTHONPATH": os.pathsep.join([str(baseline), env.get("PYTHONPATH", "")])}
        out += [(f"{label} [baseline]", argv, old) for label, argv in dubbo]
    return out


def run_once(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    """Seconds from spawn to exit of one process; a failing command stops the benchmark."""
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{argv} failed ({done.returncode}): {done.stderr.decode()[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="runs per command (median kept)")
    parser.add_argument(
        "--baseline", type=Path, help="another checkout to measure in the same rounds"
    )
    args = parser.parse_args()
    # the registry must not be read (rules validate would then reach for it), nor the bytecode
    # cache rewritten mid-run
    env = {k: v for k, v in os.environ.items() if k != "DUBBO_PY_REGISTRY"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    with tempfile.TemporaryDirectory() as tmp:
        rule_file = Path(tmp) / "greeter-condition.yaml"
        rule_file.write_text(RULE, encoding="utf-8")
        cwd = Path(tmp)
        baseline = args.baseline.resolve() if args.baseline else None
        measured = commands(rule_file, env, baseline)
        for _, argv, run_env in measured:  # warm the bytecode and page caches; not counted
            run_once(argv, run_env, cwd)
        times: dict[str, list[float]] = {label: [] for label, _, _ in measured}
        for _ in range(args.runs):
            for label, argv, run_env in measured:
                times[label].append(run_once(argv, run_env, cwd))
    grpc = statistics.median(times['python -c "import grpc"'])
    print(f"{args.runs} runs each, interleaved; median wall-clock, python {sys.version.split()[0]}")
    if args.baseline:
        print(f"[baseline]: {args.baseline} first on PYTHONPATH")
    width = max(len(label) for label in times)
    print(f"{'command':<{width}} {'median s':>9} {'min s':>7} {'vs import grpc':>15}")
    for label, values in times.items():
        median = statistics.median(values)
        print(f"{label:<{width}} {median:>9.3f} {min(values):>7.3f} {median / grpc:>14.2f}x")


if __name__ == "__main__":
    main()
