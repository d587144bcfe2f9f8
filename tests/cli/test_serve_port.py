"""A port outside 1..65535 is refused before anything starts: uvicorn would bind it modulo 65536 and announce the number given."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from brain_kernel.settings import KERNEL_VARIABLES


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        (["serve", "--port", "99999"], {}, "error: invalid setting port: Input should be less than or equal to 65535"),
        (["serve"], {"BRAIN_PORT": "0"}, "error: invalid setting BRAIN_PORT: Input should be greater than or equal to 1"),
    ],
)
def test_a_port_out_of_range_is_one_error_line_and_starts_nothing(tmp_path: Path, args: list[str], env: dict[str, str], says: str) -> None:
    base = {k: v for k, v in os.environ.items() if not k.startswith(KERNEL_VARIABLES)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "brain_cli", *args],
        cwd=tmp_path,
        env={**base, "BRAIN_ENV_FILE": "", "HOME": str(tmp_path), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _, stderr = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:  # it served: Ctrl-C stops the server and its embedded database
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    result = subprocess.CompletedProcess(proc.args, proc.returncode, "", stderr)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [says]
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no embedded database, no vault
