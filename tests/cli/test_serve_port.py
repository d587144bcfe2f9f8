"""A port outside 1..65535 or one in use is refused before anything starts: uvicorn would bind it modulo 65536 and announce the number given, or fail on it after the database started."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from brain_kernel.settings import KERNEL_VARIABLES


def _brain(folder: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``brain ARGS`` in ``folder`` (also its HOME); one that serves after all is stopped by Ctrl-C after a minute."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(KERNEL_VARIABLES)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "brain_cli", *args],
        cwd=folder,
        env={**base, "BRAIN_ENV_FILE": "", "HOME": str(folder), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _, stderr = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:  # it served: Ctrl-C stops the server and its embedded database
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, "", stderr)


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        (["serve", "--port", "99999"], {}, "error: invalid setting port: Input should be less than or equal to 65535"),
        (["serve"], {"BRAIN_PORT": "0"}, "error: invalid setting BRAIN_PORT: Input should be greater than or equal to 1"),
    ],
)
def test_a_port_out_of_range_is_one_error_line_and_starts_nothing(tmp_path: Path, args: list[str], env: dict[str, str], says: str) -> None:
    result = _brain(tmp_path, *args, **env)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [says]
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no embedded database, no vault


@pytest.fixture
def taken() -> Iterator[int]:
    """A port another process listens on."""
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        yield other.getsockname()[1]


def test_serve_on_a_port_in_use_is_one_runtime_error_line_and_starts_nothing(tmp_path: Path, taken: int) -> None:
    result = _brain(tmp_path, "serve", "--port", str(taken))
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"error: port {taken} on 127.0.0.1 is already in use: stop what listens there, or choose another port with --port or BRAIN_PORT"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # the embedded database never started


@pytest.mark.parametrize(
    ("port", "says"),
    [
        ("99999", "error: invalid setting port: Input should be less than or equal to 65535"),
        ("0", "error: invalid setting port: Input should be greater than or equal to 1"),
    ],
)
def test_mcp_over_http_bounds_its_port_as_serve_does(tmp_path: Path, port: str, says: str) -> None:
    result = _brain(tmp_path, "mcp", "--http", "--port", port)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [says]
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing under the per-user data folder either


def test_mcp_over_http_on_a_port_in_use_is_one_runtime_error_line(tmp_path: Path, taken: int) -> None:
    result = _brain(tmp_path, "mcp", "--http", "--port", str(taken))
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"error: port {taken} on 127.0.0.1 is already in use: stop what listens there, or choose another port with --port"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == []
