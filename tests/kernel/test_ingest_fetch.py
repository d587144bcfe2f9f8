"""Ingest's fetchers (``brain_kernel.ingest.fetch``) at their limits: a clone too large or too slow, a path outside the roots."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from brain_kernel.ingest.fetch import FetchError, clone, read_local
from brain_kernel.settings import Settings
from tests.support.gitrepo import git, make_repo
from tests.support.harness import make_settings


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A TCP server on 127.0.0.1 that accepts and never answers: a git remote that hangs."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        sock.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(sock.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/org/repo.git"
    finally:
        stop.set()
        thread.join(2)
        for conn in held:
            conn.close()
        sock.close()


def _settings(tmp_path: Path, **overrides: object) -> Settings:
    return make_settings(tmp_path, None, **{"local_read_roots": [str(tmp_path / "roots")], **overrides})


def test_a_clone_larger_than_the_limit_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "roots" / "big")
    (repo / "blob.bin").write_bytes(os.urandom(256 * 1024))  # random: git cannot compress it under the limit
    git(repo, "add", "blob.bin")
    git(repo, "commit", "-q", "-m", "blob")
    with pytest.raises(FetchError, match="clone larger than 65536 bytes"):
        clone(repo.as_uri(), _settings(tmp_path, ingest_clone_max_bytes=65536))
    found = clone(repo.as_uri(), _settings(tmp_path))
    assert found.files == ["README.md", "blob.bin"] and found.readme == "# big\n" and found.more == 0


def test_a_clone_that_hangs_is_killed_at_its_time_limit(tmp_path: Path, silent_server: str) -> None:
    with pytest.raises(FetchError, match=r"clone timed out after 0.5 s"):
        clone(silent_server, _settings(tmp_path, ingest_clone_timeout_s=0.5))


def test_a_local_file_is_read_inside_the_roots_and_within_the_size_limit(tmp_path: Path) -> None:
    (tmp_path / "roots").mkdir()
    small, large = tmp_path / "roots" / "small.md", tmp_path / "roots" / "large.md"
    small.write_text("hello")
    large.write_text("x" * 5000)
    settings = _settings(tmp_path, ingest_fetch_max_bytes=4096)
    assert read_local(str(small), settings) == ("small.md", "hello")
    assert read_local(small.as_uri(), settings) == ("small.md", "hello")
    for value, reason in ((str(large), "larger than 4096 bytes"), ("roots/small.md", "must be absolute"), (str(tmp_path / "roots"), "not a file")):
        with pytest.raises(FetchError, match=reason):
            read_local(value, settings)
    with pytest.raises(FetchError, match="BRAIN_LOCAL_READ_ROOTS is empty"):
        read_local(str(small), _settings(tmp_path, local_read_roots=[]))
