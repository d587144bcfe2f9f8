"""Real servers for tests and benchmarks: a free port, ``brain serve`` started until healthy, stopped for sure.

The benchmarks import these (``bench.common``); nothing here imports from ``bench``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from http.server import ThreadingHTTPServer
from pathlib import Path

import httpx

from brain_kernel.settings import Settings, child_environment


class StubHTTPServer(ThreadingHTTPServer):
    """A stand-in server on 127.0.0.1 that says nothing when its client hangs up.

    Hooks give up at their budget by design, so a handler still writing meets a
    closed socket; the default prints that traceback to ``sys.stderr`` from its
    thread, into whatever test is capturing stderr then. Other errors print as before.
    """

    def handle_error(self, request: object, client_address: object) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(
    settings: Settings, workers: int = 1, log: Path | None = None, *, new_session: bool = False, timeout: float = 90.0
) -> tuple[subprocess.Popen[bytes], str]:
    """``brain serve`` in a subprocess, once ``/health`` answers: (process, base URL).

    Its output is appended to ``log`` when given (an undrained pipe could
    stall a server that logs), and the end of that log is in the error when
    it exits or stays unhealthy; ``new_session`` starts it in a process group
    of its own (``bench_crash`` kills the group). The benches and the tests
    share this one helper.
    """
    port = free_port()
    cmd = [sys.executable, "-m", "brain_cli", "serve", "--port", str(port), "--workers", str(workers)]
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") if log is not None else contextlib.nullcontext(subprocess.DEVNULL) as out:  # the child keeps its own copy
        proc = subprocess.Popen(cmd, env=child_environment(settings), stdout=out, stderr=out, start_new_session=new_session)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=1) as http:
        while time.monotonic() < deadline:  # polling a starting process, not waiting on the code under test
            if proc.poll() is not None:
                raise RuntimeError(f"brain serve exited during start-up (exit {proc.returncode}): {log_tail(log)}")
            try:
                if http.get(f"{base}/health").status_code == 200:
                    return proc, base
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
    if new_session:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    proc.kill()
    proc.wait(15)
    raise RuntimeError(f"brain serve did not become healthy in {timeout:g} s: {log_tail(log)}")


def stop(proc: subprocess.Popen[bytes], seconds: float = 30) -> int:
    """SIGTERM, then SIGKILL if it has not ended within ``seconds``: its exit code."""
    proc.terminate()
    try:
        return proc.wait(seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait(5)


def log_tail(log: Path | None, chars: int = 2000) -> str:
    """The end of a server's log, for a failure message."""
    return log.read_text(errors="replace")[-chars:] if log is not None and log.exists() else "(no log kept)"
