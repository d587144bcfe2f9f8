"""One job's vault writes (ADR 0039): a file written only when it changes, moves, removals, dry runs, staged edits, counts."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from brain_kernel.index.changes import Changed
from brain_kernel.vault_store import Vault
from brain_kernel.vault_writes import VaultWrites


def _files(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def vault(tmp_path: Path) -> Vault:
    v = Vault(tmp_path)
    v.write_atomic("clusters/2026-12-01/a.md", "a\n")
    v.write_atomic("clusters/2026-12-01/b.md", "b\n")
    v.write_atomic("raw/inbox/note.md", "note\n")
    return v


def test_a_file_is_written_only_when_its_text_changes(vault: Vault) -> None:
    writes = VaultWrites(vault)
    assert writes.write("clusters/2026-12-01/a.md", "a\n") is False
    assert writes.write("clusters/2026-12-01/a.md", "a!\n", same=lambda old, new: old.rstrip("!\n") == new.rstrip("!\n")) is False
    assert writes.write("clusters/2026-12-01/a.md", "A\n") is True and vault.read_text("clusters/2026-12-01/a.md") == "A\n"
    assert writes.write("brain-feed/new.md", "new\n") is True
    assert writes.move("raw/inbox/note.md", "left/note.md") is True and vault.read_text("left/note.md") == "note\n"
    assert writes.move("clusters/2026-12-01/b.md", "clusters/2026-12-01/a.md") is False  # taken: refused, nothing moved
    assert writes.refused == ["clusters/2026-12-01/b.md -> clusters/2026-12-01/a.md: target exists"]
    assert writes.remove("clusters/2026-12-01/b.md") is True and writes.remove("clusters/2026-12-01/b.md") is False
    assert (writes.files_written, writes.moves, writes.removals, writes.total) == (2, 1, 1, 4)
    assert writes.touched == ["clusters/2026-12-01/a.md", "brain-feed/new.md", "raw/inbox/note.md", "left/note.md", "clusters/2026-12-01/b.md"]


def test_a_dry_run_touches_no_file_and_later_steps_read_what_it_would_have_written(vault: Vault, tmp_path: Path) -> None:
    before = _files(tmp_path)
    writes = VaultWrites(vault, dry_run=True)
    assert writes.move("raw/inbox/note.md", "left/note.md", "note, tagged\n") is True
    assert writes.read("left/note.md") == "note, tagged\n" and writes.exists("left/note.md") and not writes.exists("raw/inbox/note.md")
    with pytest.raises(FileNotFoundError):
        writes.read("raw/inbox/note.md")
    assert writes.move("left/note.md", "frontal-lobe/note.md") is True and writes.read("frontal-lobe/note.md") == "note, tagged\n"
    assert writes.write("clusters/2026-12-01/a.md", "A\n", changed=True) and writes.read("clusters/2026-12-01/a.md") == "A\n"
    assert writes.remove("clusters/2026-12-01/b.md") is True and not writes.exists("clusters/2026-12-01/b.md")
    assert writes.flush() == [] and writes.total == 0 and _files(tmp_path) == before
    assert "frontal-lobe/note.md" in writes.touched and "clusters/2026-12-01/b.md" in writes.touched


def test_staged_edits_compose_and_flush_writes_before_removals(vault: Vault, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writes = VaultWrites(vault, staged=True)
    writes.write("clusters/2026-12-01/a.md", writes.read("clusters/2026-12-01/a.md") + "edge\n", changed=True)
    writes.write("clusters/2026-12-01/a.md", writes.read("clusters/2026-12-01/a.md") + "summary\n", changed=True)
    assert writes.move("clusters/2026-12-01/b.md", "clusters/2026-12-01/b.merged.md", "tombstone\n") is True
    assert vault.read_text("clusters/2026-12-01/a.md") == "a\n" and vault.exists("clusters/2026-12-01/b.md")  # nothing made yet
    order: list[str] = []
    monkeypatch.setattr(Vault, "write_atomic", lambda self, rel, text, real=Vault.write_atomic: (order.append(f"write {rel}"), real(self, rel, text))[1])
    monkeypatch.setattr(Vault, "remove", lambda self, rel, real=Vault.remove: (order.append(f"remove {rel}"), real(self, rel))[1])
    made = writes.flush()
    assert made == ["clusters/2026-12-01/a.md", "clusters/2026-12-01/b.merged.md", "clusters/2026-12-01/b.md"]
    assert order == ["write clusters/2026-12-01/a.md", "write clusters/2026-12-01/b.merged.md", "remove clusters/2026-12-01/b.md"]
    assert _files(tmp_path)["clusters/2026-12-01/a.md"] == "a\nedge\nsummary\n" and not vault.exists("clusters/2026-12-01/b.md")
    assert (writes.files_written, writes.removals) == (2, 1) and writes.flush() == []
    changes = writes.changes(made)  # what sync_changes takes: the texts held, a path for the file gone
    assert changes == [
        Changed("clusters/2026-12-01/a.md", "a\nedge\nsummary\n"),
        Changed("clusters/2026-12-01/b.merged.md", "tombstone\n"),
        "clusters/2026-12-01/b.md",
    ]


def test_rewrites_from_threads_are_counted_and_their_folders_synced_once(vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(40):
        vault.write_atomic(f"clusters/2026-12-0{i % 4 + 1}/arc-{i}.md", f"{i}\n")
    synced: list[set[str]] = []
    monkeypatch.setattr(Vault, "sync_folders", lambda self, rels: synced.append({r.rpartition("/")[0] for r in rels}))
    writes = VaultWrites(vault)
    with ThreadPoolExecutor(4) as pool:
        infos = list(pool.map(lambda i: writes.rewrite_listed(f"clusters/2026-12-0{i % 4 + 1}/arc-{i}.md", f"{i} edited\n"), range(40)))
    assert all(info is not None and info.st_size == len(f"{i} edited\n") for i, info in enumerate(infos))
    assert writes.files_written == 40 and len(writes.touched) == 40
    writes.sync_folders()
    writes.sync_folders()
    assert synced == [{f"clusters/2026-12-0{d}" for d in range(1, 5)}, set()]


def test_a_locked_rewrite_edits_the_exact_text_and_a_dry_one_only_runs_the_edit(vault: Vault, tmp_path: Path) -> None:
    (tmp_path / "left").mkdir(exist_ok=True)
    (tmp_path / "left/lessons.md").write_bytes(b"one\r\ntwo\r\n")
    seen: list[str] = []

    def edit(text: str) -> str:
        seen.append(text)
        return text.replace("two", "TWO")

    dry = VaultWrites(vault, dry_run=True)
    assert dry.rewrite_locked("left/lessons.md", edit) is None and (tmp_path / "left/lessons.md").read_bytes() == b"one\r\ntwo\r\n"
    assert dry.texts["left/lessons.md"] == "one\r\nTWO\r\n"
    writes = VaultWrites(vault)
    info = writes.rewrite_locked("left/lessons.md", edit)
    assert info is not None and (tmp_path / "left/lessons.md").read_bytes() == b"one\r\nTWO\r\n" and writes.files_written == 1
    assert seen == ["one\r\ntwo\r\n", "one\r\ntwo\r\n"] and writes.rewrite_locked("left/lessons.md", edit) is None
