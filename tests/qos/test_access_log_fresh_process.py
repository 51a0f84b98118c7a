"""An access log an operator switches on is seen, in a fresh process that never set up logging:
a real provider and consumer on the embedded registry (tests/support/fresh_accesslog_peer.py),
the override pushed as an operator does (``dubbo-py rules push``), one call. With no handler
anywhere the line goes to standard error (as Python's last-resort handler does for warnings);
a handler the application attached to ``dubbo.accesslog`` receives it at INFO, and then it is
not on standard error; a level the application chose for that logger is kept."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

from tests.support.processes import ROOT

PEER = ROOT / "tests" / "support" / "fresh_accesslog_peer.py"
LINE = "SayHello(demo.HelloRequest) [name: 'ada'] OK "
OVERRIDE = (
    "configVersion: v3.0\nscope: service\nkey: demo.Greeter:1.0.0\nenabled: true\n"
    "configs:\n  - side: consumer\n    parameters:\n      accesslog: 'true'\n"
)


def run_switched_on(tmp_path: Path, *args: str) -> tuple[str, str]:
    """(stdout, stderr) of the peer run with ``args``, its access log switched on by an
    override pushed through the CLI once its consumer is live."""
    registry = f"sqlite:///{tmp_path / 'registry.db'}"
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, str(PEER), "--registry", registry, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )
    assert proc.stdout is not None and proc.stdin is not None and proc.stderr is not None
    errors: list[str] = []
    reader = threading.Thread(target=lambda: errors.extend(proc.stderr), daemon=True)  # type: ignore[arg-type]
    reader.start()
    out: list[str] = []
    try:
        for line in proc.stdout:
            out.append(line)
            if line.startswith("READY"):
                break
        assert out and out[-1].startswith("READY"), "".join(out + errors)
        rule = tmp_path / "override.yaml"
        rule.write_text(OVERRIDE, encoding="utf-8")
        pushed = subprocess.run(
            [
                sys.executable,
                "-m",
                "dubbo_py.admin",
                "--registry",
                registry,
                "rules",
                "push",
                str(rule),
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            timeout=60,
        )
        assert pushed.returncode == 0, pushed.stdout + pushed.stderr
        proc.stdin.write("go\n")
        proc.stdin.flush()
        # Not communicate(): it would read standard error too, racing the reader thread for
        # the very line this test looks for.
        guard = threading.Timer(60, proc.kill)
        guard.start()
        try:
            out.append(proc.stdout.read())
            proc.wait(10)
        finally:
            guard.cancel()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
    reader.join(10)
    stdout, stderr = "".join(out), "".join(errors)
    assert "CALLED ''" in stdout, stdout + stderr  # the override switched it on
    return stdout, stderr


def test_with_no_logging_set_up_the_line_goes_to_standard_error(tmp_path: Path) -> None:
    stdout, stderr = run_switched_on(tmp_path)
    logged = [line for line in stderr.splitlines() if LINE in line]
    assert len(logged) == 1, stderr
    assert " - demo.Greeter:1.0.0 " in logged[0] and logged[0].startswith("[")
    assert "HANDLER" not in stdout


def test_a_handler_on_the_access_logger_receives_the_line_at_info(tmp_path: Path) -> None:
    stdout, stderr = run_switched_on(tmp_path, "--handler")
    handled = [line for line in stdout.splitlines() if line.startswith("HANDLER")]
    assert len(handled) == 1 and LINE in handled[0], stdout
    assert handled[0].startswith("HANDLER INFO dubbo.accesslog.demo.Greeter [")
    assert LINE not in stderr  # a handler is configured: not the last resort


def test_a_level_the_application_chose_for_the_access_logger_is_kept(tmp_path: Path) -> None:
    stdout, stderr = run_switched_on(tmp_path, "--handler", "--level", "WARNING")
    assert "HANDLER" not in stdout
    assert LINE not in stderr
