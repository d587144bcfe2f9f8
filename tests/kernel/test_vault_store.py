"""The vault store: atomic writes keep readable permissions, appends and claims never collide."""

from __future__ import annotations

import os
import stat
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from brain_kernel.vault_store import Vault, VaultPathError


def test_new_files_are_world_readable_and_rewrites_keep_their_mode(tmp_path: Path) -> None:
    vault = Vault(tmp_path)
    vault.write_atomic("brain-feed/hot-arcs.md", "a\n")
    assert stat.S_IMODE((tmp_path / "brain-feed/hot-arcs.md").stat().st_mode) == 0o644
    os.chmod(tmp_path / "brain-feed/hot-arcs.md", 0o640)
    vault.write_atomic("brain-feed/hot-arcs.md", "b\n")
    assert stat.S_IMODE((tmp_path / "brain-feed/hot-arcs.md").stat().st_mode) == 0o640
    assert (tmp_path / "brain-feed/hot-arcs.md").read_text() == "b\n"
    assert not [p for p in (tmp_path / "brain-feed").iterdir() if p.name.endswith(".tmp")]


def test_paths_outside_the_vault_are_refused(tmp_path: Path) -> None:
    vault = Vault(tmp_path / "v")
    for bad in ("../x.md", "a/../../x.md", "/etc/passwd", "a\x00b"):
        with pytest.raises(VaultPathError):
            vault.path(bad)


def test_concurrent_appends_keep_every_entry_whole(tmp_path: Path) -> None:
    vault = Vault(tmp_path)
    entries = [f"## entry {i}\n" + ("x" * 5000) + "\n" for i in range(200)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda e: vault.append("left/reference/lessons-2026-11-29.md", e, header="# Lessons\n"), entries))
    text = (tmp_path / "left/reference/lessons-2026-11-29.md").read_text()
    assert text.startswith("# Lessons\n") and text.count("# Lessons\n") == 1
    assert sorted(text[len("# Lessons\n") :].split("## ")[1:]) == sorted(e[3:] for e in entries)


def test_claimed_numbers_are_unique(tmp_path: Path) -> None:
    vault = Vault(tmp_path)
    with ThreadPoolExecutor(8) as pool:
        numbers = list(pool.map(lambda _: vault.claim_number("left/decisions"), range(50)))
    assert sorted(numbers) == list(range(1, 51))


def test_symlinks_are_not_walked(tmp_path: Path) -> None:
    vault = Vault(tmp_path / "v")
    vault.write_atomic("left/real.md", "real\n")
    (tmp_path / "outside.md").write_text("secret\n")
    os.symlink(tmp_path / "outside.md", tmp_path / "v/left/out.md")
    os.symlink(tmp_path / "v/left/real.md", tmp_path / "v/left/twin.md")
    os.symlink(tmp_path, tmp_path / "v/left/up")
    assert [vault.rel(p) for p in vault.iter_files()] == ["left/real.md"]
