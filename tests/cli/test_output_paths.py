"""A file a command writes goes into a folder that exists: a missing one is one error line and exit 2, and a dry run writes nothing.

Each case runs the real ``brain`` process in an empty folder (also its HOME)
and then lists everything under that folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from brain_kernel.settings import KERNEL_VARIABLES


def _brain(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(KERNEL_VARIABLES)}
    env.update({"BRAIN_ENV_FILE": "", "HOME": str(folder)})
    return subprocess.run([sys.executable, "-m", "brain_cli", *args], cwd=folder, env=env, capture_output=True, text=True, timeout=60)


def _everything(folder: Path) -> list[str]:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["init", "--env-file", "no/dir/.env"], "error: --env-file no/dir/.env: folder no/dir does not exist"),
        (["init", "--helm-values", "no/x.yaml"], "error: --helm-values no/x.yaml: folder no does not exist"),
        (["repair", "--dry-run", "--vault", "vault", "--audit", "no/dir/x.jsonl"], "error: --audit no/dir/x.jsonl: folder no/dir does not exist"),
        (["scrub", "--dry-run", "--vault", "vault", "--audit", "no/dir/x.jsonl"], "error: --audit no/dir/x.jsonl: folder no/dir does not exist"),
    ],
)
def test_an_output_file_in_a_missing_folder_is_one_error_line_and_writes_nothing(tmp_path: Path, args: list[str], says: str) -> None:
    (tmp_path / "vault").mkdir()
    result = _brain(tmp_path, *args)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [says]
    assert _everything(tmp_path) == ["vault"]


def test_a_dry_run_with_nothing_to_change_leaves_no_audit_file(tmp_path: Path) -> None:
    (tmp_path / "vault").mkdir()
    result = _brain(tmp_path, "repair", "--dry-run", "--vault", "vault", "--audit", "repair-dry.jsonl")
    assert result.returncode == 0, result.stderr
    assert '"dry_run": true' in result.stdout.splitlines()[-1]
    assert _everything(tmp_path) == ["vault"]
