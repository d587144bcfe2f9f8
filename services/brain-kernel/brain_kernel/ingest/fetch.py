"""Ingest's fetchers: a web page, a repository by shallow clone, a file inside the allowed folders.

Each fetch is bounded in time and size by the settings
(``BRAIN_INGEST_FETCH_*`` for pages and files, ``BRAIN_INGEST_CLONE_*`` for
clones) and fails with a ``FetchError`` whose message is the one line the
answer's ``errors`` carries: a slow or large page is refused, not cut into
a partial note. A clone runs ``git`` with no prompt, over http(s), or
``file://`` only for a repository inside the local read roots (a client
names paths on the server's disk only where the operator allowed it), with
no checkout: the README and the file tree are read from the object store,
and the clone is killed when its folder outgrows the limit. A local path is
resolved (links followed) before it is checked against the roots.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import tempfile
import time
import urllib.parse
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from brain_kernel.errors import BrainError
from brain_kernel.identity.gitfacts import git_env
from brain_kernel.settings import Settings, environ_snapshot

MAX_TEXT_CHARS = 500_000  # upstream's cut of a page's or a file's text
MAX_README_CHARS = 100_000
MAX_TREE_ENTRIES = 500
MAX_REDIRECTS = 5
CLONE_POLL_S = 0.1
GIT_READ_TIMEOUT_S = 30.0
_GITHUB_REPO = re.compile(r"^(https?://(?:www\.)?github\.com/[^/\s?#]+/[^/\s?#]+?)(?:\.git)?(?:[/?#].*)?$", re.IGNORECASE)
_README = re.compile(r"^readme(\.[a-z0-9]+)?$", re.IGNORECASE)


class FetchError(BrainError):
    """A fetch that failed; the message is the answer's error line."""


@dataclass(frozen=True)
class Repository:
    """What a clone gives a note: the README's text, the first file paths, how many more there are."""

    readme: str
    files: list[str]
    more: int


def _decode(data: bytes, encoding: str | None) -> str:
    try:
        return data.decode(encoding or "utf-8", errors="replace")
    except LookupError:  # a charset Python does not know
        return data.decode("utf-8", errors="replace")


def fetch_url(url: str, settings: Settings, *, transport: httpx.BaseTransport | None = None) -> str:
    """A page's text (redirects followed, at most ``MAX_TEXT_CHARS``), or FetchError past the size or time limit."""
    if urllib.parse.urlsplit(url).scheme.lower() not in ("http", "https"):
        raise FetchError("only http and https URLs are fetched")
    limit, seconds = settings.ingest_fetch_max_bytes, settings.ingest_fetch_timeout_s
    deadline = time.monotonic() + seconds
    try:
        with (
            httpx.Client(transport=transport, follow_redirects=True, max_redirects=MAX_REDIRECTS, timeout=httpx.Timeout(seconds)) as client,
            client.stream("GET", url, headers={"Accept": "text/html, text/plain, text/markdown, */*;q=0.5", "Accept-Encoding": "gzip, deflate"}) as response,
        ):
            if response.status_code >= 400:
                raise FetchError(f"HTTP {response.status_code}")
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > limit:
                raise FetchError(f"larger than {limit} bytes ({declared})")
            unpack = _bounded_decoder(response.headers.get("content-encoding", ""))
            data = bytearray()
            # Raw bytes, unpacked here at most to the limit: a compressed body is bounded by what it unpacks to,
            # not by its size on the wire (a gigabyte of zeros is a megabyte of gzip).
            for chunk in response.iter_raw():
                data += unpack(chunk, limit + 1 - len(data))
                if len(data) > limit:
                    raise FetchError(f"larger than {limit} bytes")
                if time.monotonic() > deadline:
                    raise FetchError(f"timed out after {seconds:g} s")
            return _decode(bytes(data), response.encoding)[:MAX_TEXT_CHARS]
    except httpx.TimeoutException:
        raise FetchError(f"timed out after {seconds:g} s") from None
    except httpx.TooManyRedirects:
        raise FetchError(f"more than {MAX_REDIRECTS} redirects") from None
    except httpx.HTTPError as exc:
        raise FetchError(f"{type(exc).__name__}: {str(exc)[:200] or 'request failed'}") from None


def _bounded_decoder(encoding: str) -> Callable[[bytes, int], bytes]:
    """``(chunk, at most) -> bytes`` for a body's ``Content-Encoding``: identity, gzip or deflate; FetchError for others."""
    name = encoding.strip().lower()
    if name in ("", "identity"):
        return lambda chunk, most: chunk[: max(most, 0)]
    if name not in ("gzip", "x-gzip", "deflate"):
        raise FetchError(f"content encoding {encoding!r} is not read")
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS if "gzip" in name else zlib.MAX_WBITS)

    def unpack(chunk: bytes, most: int) -> bytes:
        try:
            return inflater.decompress(chunk, max(most, 1))  # what is left over is past the limit anyway
        except zlib.error as exc:
            raise FetchError(f"a {name} body that does not unpack: {exc}") from None

    return unpack


def _roots(settings: Settings) -> list[Path]:
    return [Path(root).expanduser().resolve() for root in settings.local_read_roots if str(root).strip()]


def allowed_path(value: str, settings: Settings) -> Path:
    """``value`` resolved (links followed), when it lies inside a local read root; else FetchError."""
    roots = _roots(settings)
    if not roots:
        raise FetchError("no local paths are read here (BRAIN_LOCAL_READ_ROOTS is empty)")
    raw = value[len("file://") :] if value.lower().startswith("file://") else value
    path = Path(urllib.parse.unquote(raw)).expanduser()
    if not path.is_absolute():
        raise FetchError("a local path must be absolute")
    resolved = path.resolve()
    if not any(resolved == root or resolved.is_relative_to(root) for root in roots):
        raise FetchError("outside the local read roots (BRAIN_LOCAL_READ_ROOTS)")
    return resolved


def read_local(value: str, settings: Settings) -> tuple[str, str]:
    """(the file's name, its text) for a path inside the local read roots; FetchError otherwise, or past the size limit."""
    path = allowed_path(value, settings)
    limit = settings.ingest_fetch_max_bytes
    try:
        if not path.is_file():
            raise FetchError("not a file")
        if path.stat().st_size > limit:
            raise FetchError(f"larger than {limit} bytes")
        data = path.read_bytes()
    except OSError as exc:
        raise FetchError(f"cannot read: {exc.strerror or exc}") from None
    return path.name, _decode(data[: limit + 1], "utf-8")[:MAX_TEXT_CHARS]


def clone_url(value: str, settings: Settings) -> str:
    """The URL to clone: a GitHub page's repository, an http(s) URL, or ``file://`` inside the local read roots."""
    github = _GITHUB_REPO.match(value)
    if github:
        return github.group(1)
    scheme = urllib.parse.urlsplit(value).scheme.lower()
    if scheme in ("http", "https"):
        return value
    if scheme == "file":
        folder = allowed_path(value, settings)
        _repository_inside(folder, settings)
        return folder.as_uri()
    raise FetchError("only http(s) repositories, or file:// inside the local read roots, are cloned")


def _repository_inside(folder: Path, settings: Settings) -> None:
    """FetchError unless the repository at ``folder`` keeps its git data inside the local read roots: a ``.git`` file
    or link, or an objects alternate, would have the clone read a repository outside them."""
    roots = _roots(settings)

    def inside(path: Path) -> bool:
        resolved = path.resolve()
        return any(resolved == root or resolved.is_relative_to(root) for root in roots)

    try:
        dirs = _git(folder, "rev-parse", "--absolute-git-dir", "--git-common-dir").decode("utf-8", "replace").splitlines()
    except FetchError:
        return  # not a repository: the clone says so
    git_dirs = [Path(d) if Path(d).is_absolute() else folder / d for d in dirs if d]
    # Every object store the clone may read: each git folder's (resolved: it may be a link), and the alternates they
    # name, and theirs in turn (a chain), relative ones to the store naming them.
    stores, todo = [], [d / "objects" for d in git_dirs]
    while todo and len(stores) < 32:
        store = todo.pop().resolve()
        if store in stores:
            continue
        stores.append(store)
        with contextlib.suppress(OSError):
            for line in (store / "info" / "alternates").read_text().splitlines():
                if line.strip() and not line.startswith("#"):
                    todo.append(Path(line.strip()) if Path(line.strip()).is_absolute() else store / line.strip())
    if todo or not all(inside(d) for d in [*git_dirs, *stores]):
        raise FetchError("the repository's git data lies outside the local read roots (BRAIN_LOCAL_READ_ROOTS)")


def _folder_bytes(folder: Path) -> int:
    total = 0
    for base, _dirs, names in os.walk(folder):
        for name in names:
            with contextlib.suppress(OSError):  # a pack file renamed while git works
                total += os.lstat(os.path.join(base, name)).st_size
    return total


def _git_env() -> dict[str, str]:
    env = git_env(environ_snapshot())  # nothing pointing git at another repository, no prompt
    # No protocol beyond these, no system or user config that could add helpers.
    env.update({"GIT_ALLOW_PROTOCOL": "http:https:file", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull})
    return env


def _git(folder: Path, *args: str) -> bytes:
    proc = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, timeout=GIT_READ_TIMEOUT_S, env=_git_env())
    if proc.returncode != 0:
        raise FetchError(f"git {args[0]} failed: {proc.stderr.decode('utf-8', 'replace').strip()[:200]}")
    return proc.stdout


def _git_head(folder: Path, *args: str, most: int) -> bytes:
    """The first ``most`` bytes git writes for ``args``; git is stopped there. A blob is read whole otherwise, and a
    shallow clone under the size limit can hold a file of gigabytes that packs to a few (zeros pack to nothing)."""
    with subprocess.Popen(["git", "-C", str(folder), *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=_git_env()) as proc:
        assert proc.stdout is not None
        head = proc.stdout.read(most)
        proc.kill()
    return head


def clone(value: str, settings: Settings) -> Repository:
    """A shallow clone's README and file tree; FetchError when the clone fails, runs too long or grows too large."""
    url = clone_url(value, settings)
    limit, seconds = settings.ingest_clone_max_bytes, settings.ingest_clone_timeout_s
    with tempfile.TemporaryDirectory(prefix="brain-ingest-") as tmp:
        target = Path(tmp) / "repo"
        cmd = ["git", "clone", "--depth=1", "--no-checkout", "--single-branch", "--no-tags", "--quiet", "--", url, str(target)]
        with tempfile.TemporaryFile() as errors:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errors, env=_git_env())
            started = time.monotonic()
            try:
                while proc.poll() is None:  # watching a clone: its time and its folder's size
                    if time.monotonic() - started > seconds:
                        raise FetchError(f"clone timed out after {seconds:g} s")
                    if target.exists() and _folder_bytes(target) > limit:
                        raise FetchError(f"clone larger than {limit} bytes")
                    time.sleep(CLONE_POLL_S)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            if target.exists() and _folder_bytes(target) > limit:  # a clone that ended between two looks
                raise FetchError(f"clone larger than {limit} bytes")
            if proc.returncode != 0:
                errors.seek(0)
                said = errors.read(2000).decode("utf-8", "replace").strip().splitlines()
                raise FetchError(f"clone failed: {(said[-1] if said else f'exit {proc.returncode}')[:200]}")
        try:
            listed = _git(target, "ls-tree", "-r", "-z", "--name-only", "HEAD").decode("utf-8", "replace").split("\0")
        except FetchError:
            raise FetchError("the repository has no commit to read") from None
        files = [name for name in listed if name]
        top = sorted((name for name in files if "/" not in name and _README.match(name)), key=lambda n: (n.lower() != "readme.md", n))
        readme = _git_head(target, "cat-file", "blob", f"HEAD:{top[0]}", most=4 * MAX_README_CHARS).decode("utf-8", "replace")[:MAX_README_CHARS] if top else ""
        return Repository(readme, files[:MAX_TREE_ENTRIES], max(0, len(files) - MAX_TREE_ENTRIES))
