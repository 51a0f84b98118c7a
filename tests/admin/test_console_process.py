"""``dubbo-py console`` as a process: Ctrl-C ends it quietly with exit status 0 (issue 35,
finding 7: it printed ``error: aborted`` and exited 1)."""

from __future__ import annotations

import signal
from pathlib import Path

from tests.support.console_process import ConsoleProcess


def test_ctrl_c_ends_the_console_with_exit_status_0(tmp_path: Path) -> None:
    console = ConsoleProcess(f"sqlite://{tmp_path}/registry.db").start()
    proc = console.proc
    assert proc is not None and proc.stdout is not None
    try:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(30)
        rest = proc.stdout.read()
    finally:
        console.stop()
    assert code == 0, rest
    assert "error" not in rest.lower() and "Traceback" not in rest, rest
