"""The hook's way to the kernel: the per-user client file and plain HTTP calls bounded by a deadline.

The client file is ``$XDG_CONFIG_HOME/brain/client.json`` (``~/.config/brain/client.json`` by
default, mode 0600), ``{"url", "token", "no_project"}``, written by ``brain connect``
(docs/connect.md). This module is the hook's settings: the one other reader of the environment
besides ``brain_kernel.settings``, because the hook cannot afford to import pydantic (ADR 0042).

Plain ``http://`` goes over a socket with a one-shot HTTP/1.1 request (``Connection: close``):
``urllib.request`` and ``http.client`` import ``ssl`` and ``email``, which cost more than the rest of
the hook's start (ADR 0042). HTTP/1.1, not 1.0, because proxies in front of a kernel (Envoy's
default, some egress gateways) answer 1.0 with 426. ``https://`` takes ``http.client``, imported only then.
"""

from __future__ import annotations

import json
import os
import socket
import time
import urllib.parse
from pathlib import Path


def _xdg(name: str, default: str) -> Path:
    """An XDG base folder: the variable when it holds an absolute path (the spec ignores a relative one), else the default under home."""
    value = os.environ.get(name, "")
    return Path(value) if os.path.isabs(value) else Path.home() / default


def process_environ() -> dict[str, str]:
    """The variables the agent started the hook with (its git processes get them, less what points git elsewhere)."""
    return dict(os.environ)


def config_dir() -> Path:
    """``$XDG_CONFIG_HOME/brain`` (``~/.config/brain``): where the client file lives."""
    return _xdg("XDG_CONFIG_HOME", ".config") / "brain"


def state_dir() -> Path:
    """``$XDG_STATE_HOME/brain`` (``~/.local/state/brain``): the outbox, the sent keys and the sessions' projects."""
    return _xdg("XDG_STATE_HOME", ".local/state") / "brain"


class Answer:
    """One HTTP answer: status (0 when the kernel could not be reached), content type and body."""

    def __init__(self, status: int, content_type: str, body: bytes) -> None:
        self.status = status
        self.content_type = content_type
        self.body = body

    def json(self) -> object:
        """The body as JSON, or None when it is not JSON."""
        try:
            return json.loads(self.body)
        except ValueError:
            return None


class Kernel:
    """The kernel at the client file's URL; every call takes no longer than what is left of the budget."""

    def __init__(self, url: str, token: str | None, deadline: float, *, fleet_block: bool = True, client: str | None = None) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.deadline = deadline
        self.fleet_block = fleet_block  # a folder in no project gets the fleet's block (client file "no_project": "fleet"|"none")
        self.client = client  # the client file naming this kernel: the outbox sends a marker only to the kernel it was queued for

    @classmethod
    def from_client_file(cls, path: Path, deadline: float) -> Kernel | None:
        """The kernel the client file names, or None when there is no usable client file."""
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or not isinstance(data.get("url"), str) or not data["url"]:
            return None
        token = data.get("token")
        return cls(
            data["url"],
            token if isinstance(token, str) and token else None,
            deadline,
            fleet_block=data.get("no_project", "fleet") != "none",
            client=str(path.absolute()),
        )

    def left(self) -> float:
        """Seconds left of the budget."""
        return self.deadline - time.monotonic()

    def call(self, method: str, path: str, body: object = None, headers: dict[str, str] | None = None) -> Answer:
        """One request; a network failure, a malformed answer or a spent budget answers status 0."""
        if self.left() <= 0.01:
            return Answer(0, "", b"")
        sent = {"Host": "", "Accept": "*/*", **(headers or {})}
        if self.token:
            sent["Authorization"] = f"Bearer {self.token}"
        data = b""
        if body is not None:
            data = json.dumps(body).encode()
            sent["Content-Type"] = "application/json"
        try:
            parts = urllib.parse.urlsplit(self.url + path)
            if parts.scheme == "https":
                return self._https(parts, method, sent, data)
            if parts.scheme != "http" or not parts.hostname:
                return Answer(0, "", b"")
            sent["Host"] = parts.netloc
            return self._plain(parts, method, sent, data)
        except (OSError, ValueError, IndexError):
            return Answer(0, "", b"")

    def _plain(self, parts: urllib.parse.SplitResult, method: str, headers: dict[str, str], data: bytes) -> Answer:
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        head = f"{method} {target or '/'} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        request = (head + f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n").encode() + data
        raw = b""
        with socket.create_connection((parts.hostname, parts.port or 80), timeout=max(self.left(), 0.01)) as sock:
            sock.sendall(request)
            while True:
                left = self.left()
                if left <= 0:
                    return Answer(0, "", b"")
                sock.settimeout(left)
                chunk = sock.recv(65536)
                raw += chunk
                answer = _parsed(raw, complete=not chunk)
                if answer is not None:
                    return answer
                if not chunk:
                    return Answer(0, "", b"")  # closed before the whole answer came

    def _https(self, parts: urllib.parse.SplitResult, method: str, headers: dict[str, str], data: bytes) -> Answer:
        import http.client  # imports ssl: only for a kernel behind TLS

        headers.pop("Host")
        connection = http.client.HTTPSConnection(parts.hostname or "", parts.port, timeout=max(self.left(), 0.01))
        try:
            target = parts.path + (f"?{parts.query}" if parts.query else "")
            connection.request(method, target or "/", body=data or None, headers=headers)
            response = connection.getresponse()
            return Answer(response.status, response.getheader("Content-Type") or "", response.read())
        except http.client.HTTPException:
            return Answer(0, "", b"")
        finally:
            connection.close()


def _parsed(raw: bytes, *, complete: bool) -> Answer | None:
    """The answer in ``raw`` once it is whole (by its length, its last chunk, or the connection's close), else None.

    A proxy may keep the connection open despite ``Connection: close``, so the
    length or the chunks tell when to stop reading, not only the close.
    """
    header, found, content = raw.partition(b"\r\n\r\n")
    if not found:
        return None
    lines = header.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    fields = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    if "chunked" in fields.get("transfer-encoding", "").lower():
        body = _dechunked(content)
        if body is None:
            return None
    elif "content-length" in fields:
        size = int(fields["content-length"])
        if len(content) < size:
            return None
        body = content[:size]
    elif complete or status in (204, 304) or 100 <= status < 200:
        body = content
    else:
        return None
    return Answer(status, fields.get("content-type", ""), body)


def _dechunked(content: bytes) -> bytes | None:
    """The body of a chunked transfer, or None until its last (empty) chunk has come."""
    body, at = b"", 0
    while True:
        end = content.find(b"\r\n", at)
        if end < 0:
            return None
        size = int(content[at:end].split(b";", 1)[0].strip() or b"0", 16)
        if size == 0:
            return body
        start = end + 2
        if len(content) < start + size + 2:
            return None
        body += content[start : start + size]
        at = start + size + 2
