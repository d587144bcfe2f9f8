"""Without ``XDG_RUNTIME_DIR`` (root, a container, cron) a command that loads the embedded Postgres prints no platformdirs warning.

pgserver asks platformdirs for the user's runtime folder when its module
loads; the warning that answer printed took two lines of stderr before the
command's one ``error:`` line.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from brain_kernel.settings import KERNEL_VARIABLES


def test_a_bad_value_is_still_one_error_line_without_a_runtime_folder(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(KERNEL_VARIABLES) and k != "XDG_RUNTIME_DIR"}
    result = subprocess.run(
        [sys.executable, "-m", "brain_cli", "trial", "report", "--since", "yesterday"],
        cwd=tmp_path,
        env={**env, "BRAIN_ENV_FILE": "", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == ["error: cannot read time 'yesterday': use a duration such as 24h, 7d, 90m or an ISO date"]
