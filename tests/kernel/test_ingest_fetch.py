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


def _peak_bytes(work: object) -> int:
    """The most memory Python allocated while ``work()`` ran (tracemalloc): what one ingest costs the kernel."""
    import tracemalloc

    tracemalloc.start()
    try:
        work()  # type: ignore[operator]
    except FetchError:
        pass
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak


def test_a_readme_of_many_megabytes_that_packs_small_is_read_only_to_its_cut(tmp_path: Path) -> None:
    """Zeros pack to nothing: a clone under the size limit held a 1.5 GB README, read whole before its cut (4 GB)."""
    from brain_kernel.ingest.fetch import MAX_README_CHARS

    repo = make_repo(tmp_path / "roots" / "zeros")
    (repo / "README.md").write_bytes(b"\0" * (24 * 1024 * 1024))
    git(repo, "add", "README.md")
    git(repo, "commit", "-q", "-m", "zeros")
    found: list[object] = []
    peak = _peak_bytes(lambda: found.append(clone(repo.as_uri(), _settings(tmp_path))))
    assert found and len(found[0].readme) == MAX_README_CHARS  # type: ignore[attr-defined]
    assert peak < 8 * 1024 * 1024, peak  # the cut, not the file: 24 MB read whole before


def test_a_compressed_page_is_bounded_by_what_it_unpacks_to(tmp_path: Path) -> None:
    """64 MB of zeros is 64 kB of gzip: the limit is on the page, not on its size on the wire."""
    import gzip
    from http.server import BaseHTTPRequestHandler

    from brain_kernel.ingest.fetch import fetch_url
    from tests.support.servers import StubHTTPServer

    bomb = gzip.compress(b"\0" * (64 * 1024 * 1024), compresslevel=9)

    class Bomb(BaseHTTPRequestHandler):
        def log_message(self, *_args: object) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(bomb)))
            self.end_headers()
            self.wfile.write(bomb)

    server = StubHTTPServer(("127.0.0.1", 0), Bomb)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        settings = _settings(tmp_path)  # 5 MB
        url = f"http://127.0.0.1:{server.server_address[1]}/bomb"
        with pytest.raises(FetchError, match="larger than"):
            fetch_url(url, settings)
        peak = _peak_bytes(lambda: fetch_url(url, settings))
    finally:
        server.shutdown()
        server.server_close()
    assert peak < 3 * settings.ingest_fetch_max_bytes, peak


def test_a_repository_in_the_roots_whose_git_data_lies_outside_them_is_not_cloned(tmp_path: Path) -> None:
    """A ``.git`` file, a ``.git`` link or an objects alternate pointing out of the roots: the clone read the outside."""
    secret = make_repo(tmp_path / "outside" / "secret")
    (secret / "README.md").write_text("SECRET OUTSIDE THE ROOTS\n")
    git(secret, "commit", "-qam", "secret")
    roots = tmp_path / "roots"
    gitfile = roots / "gitfile"
    gitfile.mkdir(parents=True)
    (gitfile / ".git").write_text(f"gitdir: {secret / '.git'}\n")
    linked = roots / "linked"
    linked.mkdir()
    (linked / ".git").symlink_to(secret / ".git")
    alternate = roots / "alternate.git"
    git(roots, "init", "-q", "--bare", str(alternate))
    (alternate / "objects" / "info" / "alternates").write_text(f"{secret / '.git' / 'objects'}\n")
    git(alternate, "update-ref", "refs/heads/main", git(secret, "rev-parse", "HEAD").strip())
    git(alternate, "symbolic-ref", "HEAD", "refs/heads/main")
    chained = roots / "chained.git"  # an alternate inside the roots whose own alternate is outside them
    git(roots, "init", "-q", "--bare", str(chained))
    (chained / "objects" / "info" / "alternates").write_text(f"{alternate / 'objects'}\n")
    git(chained, "update-ref", "refs/heads/main", git(secret, "rev-parse", "HEAD").strip())
    git(chained, "symbolic-ref", "HEAD", "refs/heads/main")
    linked_objects = roots / "linked-objects.git"  # its objects folder a link to the outside's
    git(roots, "init", "-q", "--bare", str(linked_objects))
    import shutil

    shutil.rmtree(linked_objects / "objects")
    (linked_objects / "objects").symlink_to(secret / ".git" / "objects")
    git(linked_objects, "update-ref", "refs/heads/main", git(secret, "rev-parse", "HEAD").strip())
    git(linked_objects, "symbolic-ref", "HEAD", "refs/heads/main")
    for repo in (gitfile, linked, alternate, chained, linked_objects):
        with pytest.raises(FetchError, match="outside the local read roots"):
            clone(repo.as_uri(), _settings(tmp_path))
    inside = make_repo(roots / "fine")
    assert clone(inside.as_uri(), _settings(tmp_path)).readme == "# fine\n"
