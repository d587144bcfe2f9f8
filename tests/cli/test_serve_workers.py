"""``brain serve --workers N`` under gunicorn (ADR 0031): what the parent's stack does when a worker leaves it.

The start, the replacement of a killed worker, SIGTERM and ``kill -9`` of the
parent are tested on the real command in test_hardening.py.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.support.servers import free_port

# A worker whose app cannot be built: gunicorn stops the server with its boot-error status (3).
_FAILING_BOOT = """
import os
from brain_cli import workers
from brain_kernel.settings import Settings

class NoApp(workers._Workers):
    def load(self):
        raise RuntimeError("no app")

workers._Workers = NoApp
try:
    workers.run(Settings.explicit(vault={vault!r}, home={home!r}, port={port}, workers=2))
finally:
    print(f"cleanup in {{os.getpid()}}", flush=True)
"""


def test_a_worker_that_cannot_boot_stops_the_server_and_runs_none_of_the_parents_cleanup(tmp_path: Path) -> None:
    """A worker leaves gunicorn's loop by raising SystemExit up the stack it shares with the parent: the parent's
    ``finally`` blocks (in ``brain serve``, the embedded database's stop) must run once, in the parent only."""
    script = textwrap.dedent(_FAILING_BOOT).format(vault=str(tmp_path / "vault"), home=str(tmp_path / "home"), port=free_port())
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 3, stderr[-2000:]
    assert stdout.splitlines() == [f"cleanup in {proc.pid}"], stdout
    assert "RuntimeError: no app" in stderr and "exited with code 3" in stderr
