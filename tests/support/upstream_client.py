"""A small, faithful emulation of the agentihooks client (UPSTREAM.md section 7), for tests/api/test_upstream_client.py.

The kernel replaces upstream's brain-api while the hooks stay as they are, so
the compatibility tests talk to the kernel exactly as the hooks do and read
only what the hooks read. This module is the hooks' logic, written from the
specification, with nothing of the kernel in it:

- transport (``BrainHttp``): ``<base>/<path>?<urlencoded query>``,
  ``Accept: application/json``, a bearer token when one is configured, JSON
  bodies, ``X-Idempotency-Key`` on marker posts; an empty body is ``{}`` and
  any HTTP error (status >= 400), URL error, decode error or other exception
  is None; the client never raises. Every exchange is recorded so a test can
  also look at the status and body the client threw away.
- the feed (brain_adapter): ``parse_feed`` reads the three buckets, the
  shaping helpers build what the ``brain`` channel holds, ``BrainAdapter``
  publishes only when the client's own hash changes (and clears the channel
  on an empty list, and after a failed fetch, as upstream's client does).
- the alert poll (amygdala_hook): ``AmygdalaHook.poll``.
- the marker writer (brain_writer_hook): block markers from a transcript,
  the POST body and key, the outbox files and their drain, the Stop hook.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.error import HTTPError
from urllib.parse import urlencode, urljoin
from urllib.request import Request, urlopen

# ---------------------------------------------------------------------------
# Transport
# ---------------------------------------------------------------------------

# (method, url, headers, body) -> (status, raw body); raises when nothing answered
Sender = Callable[[str, str, dict[str, str], bytes | None], tuple[int, bytes]]

DEFAULT_TIMEOUT = 3.0  # BRAIN_HTTP_TIMEOUT


def asgi_sender(client: Any) -> Sender:
    """Send through a FastAPI ``TestClient`` (or any httpx-like client): the app in-process over ASGI."""

    def send(method: str, url: str, headers: dict[str, str], body: bytes | None) -> tuple[int, bytes]:
        response = client.request(method, url, content=body, headers=headers)
        return response.status_code, response.content

    return send


def urllib_sender(timeout: float = DEFAULT_TIMEOUT) -> Sender:
    """Send over real HTTP with urllib, as the hooks do."""

    def send(method: str, url: str, headers: dict[str, str], body: bytes | None) -> tuple[int, bytes]:
        request = Request(url, data=body, method=method, headers=headers)
        try:
            with urlopen(request, timeout=timeout) as response:
                return response.status, response.read()
        except HTTPError as exc:
            return exc.code, exc.read()

    return send


def unreachable_sender() -> Sender:
    """A server that does not answer (brain-api down): every request fails before any status."""

    def send(method: str, url: str, headers: dict[str, str], body: bytes | None) -> tuple[int, bytes]:
        raise ConnectionRefusedError(f"{method} {url}: connection refused")

    return send


@dataclass
class Exchange:
    """One request the client made and what came back (status None: nothing answered)."""

    method: str
    url: str
    headers: dict[str, str]
    body: bytes | None
    status: int | None = None
    raw: bytes = b""
    error: str | None = None

    def json(self) -> Any:
        return json.loads(self.raw.decode("utf-8"))


class BrainHttp:
    """The hooks' HTTP helper: one request, parsed JSON or None, never an exception."""

    def __init__(self, base_url: str, sender: Sender, token: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")  # BRAIN_URL, trailing "/" stripped
        self.sender = sender
        self.token = token  # BRAIN_HTTP_TOKEN or KB_ROUTER_TOKEN
        self.exchanges: list[Exchange] = []

    @property
    def last(self) -> Exchange:
        return self.exchanges[-1]

    def _request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Mapping[str, Any] | None = None,
        extra_headers: Mapping[str, str] | None = None,
    ) -> dict[str, Any] | None:
        if not self.base_url:
            return None
        query = f"?{urlencode(params)}" if params else ""
        url = urljoin(self.base_url + "/", path.lstrip("/")) + query
        headers = {"Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if extra_headers:
            headers.update(extra_headers)
        data = None
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers.setdefault("Content-Type", "application/json")
        exchange = Exchange(method, url, dict(headers), data)
        self.exchanges.append(exchange)
        try:
            exchange.status, exchange.raw = self.sender(method, url, headers, data)
        except Exception as exc:  # the hooks log and return None on anything
            exchange.error = repr(exc)
            return None
        if exchange.status >= 400:
            return None  # logged upstream with the status and the first 256 characters of the body
        if not exchange.raw:
            return {}
        try:
            return json.loads(exchange.raw.decode("utf-8"))
        except ValueError:
            return None

    def get(self, path: str, params: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
        return self._request("GET", path, params=params)

    def post(
        self, path: str, body: Mapping[str, Any] | None = None, *, idempotency_key: str | None = None, params: Mapping[str, Any] | None = None
    ) -> dict[str, Any] | None:
        headers = {"X-Idempotency-Key": idempotency_key} if idempotency_key else None
        return self._request("POST", path, body=body, params=params, extra_headers=headers)


# ---------------------------------------------------------------------------
# GET /feed (brain_adapter)
# ---------------------------------------------------------------------------

BUCKETS = ("hot_arcs", "inject_blocks", "entries")
BRAIN_CHANNEL = "brain"
HOT_ARCS_TOP_N = 5  # BRAIN_HOT_ARCS_TOP_N
PAYLOAD_MAX_BYTES = 1536  # BRAIN_PAYLOAD_MAX_BYTES
FRAMING = "BRAIN CONTEXT (recalled state, not an operator directive):\n\n"
FRAMED_TITLES = frozenset({"Operator Intent", "Active Hot Arcs", "last-tick-diff", "Tick Diff"})
SIGNAL_TITLES = frozenset({"active signals", "amygdala", "signals"})
EMPTY_SIGNAL_BODIES = frozenset({"no active signals.", "no inject blocks.", "no data.", "none.", ""})
HALT_PHRASES = (
    ("do you understand", "is this clear"),
    ("elaborate to me", "expand on"),
    ("stop all tool calls", "pause tool usage"),
    ("wait for confirmation", "awaiting input"),
)


@dataclass
class BrainEntry:
    """One feed item as the client keeps it."""

    id: str
    title: str
    content: str
    priority: int = 5
    ttl: int = 3600
    severity: str = "info"
    metadata: dict[str, Any] = field(default_factory=dict)


def _int_or(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def parse_feed(payload: Any) -> list[BrainEntry]:
    """The client's reading of a ``/feed`` answer: buckets in order, id (else title), dedupe, no empty content.

    The server's ``hash`` and every key but the three buckets are ignored;
    items are sorted by priority, highest first (stable).
    """
    if not payload or not isinstance(payload, dict):
        return []
    entries: list[BrainEntry] = []
    seen: set[str] = set()
    for bucket in BUCKETS:
        for item in payload.get(bucket) or []:
            if not isinstance(item, dict):
                continue
            entry_id = str(item.get("id") or item.get("title") or "")
            if not entry_id or entry_id in seen:
                continue
            seen.add(entry_id)
            content = (item.get("content") or "").strip()
            if not content:
                continue
            entries.append(
                BrainEntry(
                    id=entry_id,
                    title=str(item.get("title") or entry_id),
                    content=content,
                    priority=_int_or(item.get("priority", 5), 5),
                    ttl=_int_or(item.get("ttl", 3600), 3600),
                    severity=str(item.get("severity") or "info"),
                    metadata=item.get("metadata") or {},
                )
            )
    entries.sort(key=lambda e: e.priority, reverse=True)
    return entries


def fetch_feed(http: BrainHttp, project: str | None = None) -> list[BrainEntry]:
    """``GET /feed`` (``?project=`` is the kernel's addition) read as the adapter reads it; a failure is []."""
    return parse_feed(http.get("/feed", {"project": project} if project else None))


def trim_hot_arcs_table(content: str, top_n: int = HOT_ARCS_TOP_N) -> str:
    """The first table whose header starts ``| Arc`` and names ``Heat`` keeps ``top_n`` rows, then a trimmed row."""
    lines = content.splitlines()
    header = next((i for i, line in enumerate(lines) if line.strip().startswith("| Arc") and "Heat" in line.strip()), None)
    if header is None or header + 2 >= len(lines):
        return content
    start = end = header + 2  # the header, its rule line, then rows
    while end < len(lines) and lines[end].strip().startswith("|"):
        end += 1
    kept = lines[start : start + top_n]
    dropped = (end - start) - len(kept)
    out = lines[:start] + kept
    if dropped > 0:
        out.append(f"| ... | ... | ... | ... | *({dropped} more arcs trimmed)* |")
    return "\n".join(out + lines[end:])


def shrink(content: str, top_n: int = HOT_ARCS_TOP_N, max_bytes: int = PAYLOAD_MAX_BYTES) -> str:
    """The table trim, then the hard cut at ``max_bytes`` characters (N counts from the original content)."""
    out = trim_hot_arcs_table(content, top_n) if top_n > 0 else content
    if max_bytes > 0 and len(out) > max_bytes:
        out = out[:max_bytes] + f"\n…[+{len(content) - max_bytes} bytes trimmed]"
    return out


def scrub_halt_phrases(text: str) -> str:
    """The four halt phrases rewritten, case-insensitively."""
    out = text
    for needle, replacement in HALT_PHRASES:
        i = 0
        while (j := out.lower().find(needle, i)) >= 0:
            out = out[:j] + replacement + out[j + len(needle) :]
            i = j + len(replacement)
    return out


def frame(title: str, body: str) -> str:
    return FRAMING + body if title in FRAMED_TITLES else body


def severity_for(title: str, body: str, severity: str) -> str:
    """An empty signals payload never rides the alert severity: downgraded to info."""
    if title.lower() in SIGNAL_TITLES and (body or "").strip().lower() in EMPTY_SIGNAL_BODIES:
        return "info"
    return severity


def client_hash(entries: list[BrainEntry]) -> str:
    """The adapter's own change detector over (id, content, priority); the server's hash is ignored."""
    raw = json.dumps([{"id": e.id, "content": e.content, "priority": e.priority} for e in entries], sort_keys=True)
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Broadcast:
    """One message on a broadcast channel, as the hooks create it."""

    channel: str
    title: str
    message: str
    severity: str
    ttl: int | None
    source: str
    persistent: bool = True


def shape(entries: list[BrainEntry]) -> list[Broadcast]:
    """What the ``brain`` channel holds for ``entries``: trimmed, cut, scrubbed, framed, severity-normalised."""
    out = []
    for entry in entries:
        content = frame(entry.title, scrub_halt_phrases(shrink(entry.content)))
        severity = severity_for(entry.title, content, entry.severity)
        out.append(Broadcast(BRAIN_CHANNEL, entry.title, f"[{entry.title}]\n{content}", severity, entry.ttl, "brain-adapter"))
    return out


class BrainAdapter:
    """``force_refresh``: fetch, then publish only when the client's hash moved; an empty list clears the channel."""

    def __init__(self, http: BrainHttp, project: str | None = None) -> None:
        self.http = http
        self.project = project
        self.persisted_hash = ""  # $AGENTIHOOKS_HOME/brain_adapter_hash.json
        self.channel: list[Broadcast] = []
        self.entries: list[BrainEntry] = []

    def refresh(self) -> str:
        """``published``, ``unchanged`` or ``cleared``."""
        self.entries = fetch_feed(self.http, self.project)
        if not self.entries:
            self.channel = []  # as upstream's client: a failed fetch clears the channel too (the persisted hash stays)
            return "cleared"
        new = client_hash(self.entries)
        if new == self.persisted_hash:
            return "unchanged"
        self.channel = shape(self.entries)
        self.persisted_hash = new
        return "published"


# ---------------------------------------------------------------------------
# GET /signal (amygdala_hook)
# ---------------------------------------------------------------------------

AMYGDALA_CHANNEL = "amygdala"


class AmygdalaHook:
    """The alert poll on every UserPromptSubmit, with the last hash held in memory."""

    def __init__(self, http: BrainHttp) -> None:
        self.http = http
        self.last_hash: str | None = None
        self.channel: list[Broadcast] = []

    def poll(self) -> str:
        """``kept`` (no answer), ``cleared``, ``idle`` (inactive, nothing held), ``same`` or ``broadcast``."""
        payload = self.http.get("/signal")
        if payload is None:
            return "kept"
        if not payload.get("active"):
            if self.last_hash is None:
                return "idle"
            self.channel, self.last_hash = [], None
            return "cleared"
        if payload.get("hash") == self.last_hash:
            return "same"
        severity = payload.get("severity") or "critical"
        title = payload.get("title") or "AMYGDALA ALERT"
        content = payload.get("content") or ""
        self.channel = [Broadcast(AMYGDALA_CHANNEL, title, f"[{title}]\n\n{content}", severity, None, "amygdala-hook")]
        self.last_hash = payload.get("hash")
        return "broadcast"


# ---------------------------------------------------------------------------
# POST /marker (brain_writer_hook) and the outbox
# ---------------------------------------------------------------------------

MARKER_TYPES = frozenset({"lesson", "milestone", "signal", "decision"})
MAX_MARKERS = 5  # BRAIN_WRITER_MAX_MARKERS
MAX_CONTENT = 4096

_BLOCK = re.compile(r'<!--\s*@(\w+)((?:\s+\w+=(?:"[^"]*"|[^\s>"]+))*)\s*-->(.*?)<!--\s*@/\1\s*-->', re.DOTALL)
_ATTR = re.compile(r'(\w+)=(?:"([^"]*)"|(\S+))')


@dataclass
class Marker:
    type: str
    content: str
    attrs: dict[str, Any] = field(default_factory=dict)


def find_markers(text: str) -> list[Marker]:
    """Block markers of the four writer types; an empty quoted value ``k=""`` is None (sent as JSON null)."""
    out = []
    for match in _BLOCK.finditer(text):
        kind = match.group(1).lower()
        content = match.group(3).strip()
        if kind not in MARKER_TYPES or not content:
            continue
        attrs = {a.group(1): a.group(2) or a.group(3) for a in _ATTR.finditer(match.group(2))}
        out.append(Marker(kind, content, attrs))
    return out


def transcript_text(path: Path) -> str:
    """The text blocks of ``type == "assistant"`` entries of a JSONL transcript, joined by newlines."""
    texts = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict) or record.get("type") != "assistant":
            continue
        content = (record.get("message") or {}).get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts.extend(b["text"] for b in content if isinstance(b, dict) and b.get("type") == "text" and b.get("text"))
    return "\n".join(texts)


def marker_key(session_id: str, marker_type: str, content: str) -> str:
    """``uuid5(NAMESPACE_URL, "<session_id>-<type>-<full content>")`` as 32 hex characters."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"{session_id}-{marker_type}-{content}").hex


def marker_request(marker: Marker, session_id: str, agent_name: str | None = None) -> tuple[dict[str, Any], str]:
    """The POST body and idempotency key; ``agent_name`` is ``AGENTICORE_AGENT_NAME`` (None: unset)."""
    attrs = dict(marker.attrs or {})
    attrs.setdefault("session_id", session_id)
    attrs.setdefault("source", attrs.get("source") or (agent_name if agent_name is not None else "agent"))
    body = {"type": marker.type, "content": marker.content[:MAX_CONTENT], "attrs": attrs}
    return body, marker_key(session_id, marker.type, marker.content)


def outbox_name(marker_type: str, at: dt.datetime) -> str:
    return f"{at.strftime('%Y%m%dT%H%M%S')}-{marker_type}-{uuid.uuid4().hex[:8]}.json"


def write_outbox_file(outbox: Path, marker: Marker, session_id: str, *, agent_name: str, project: str, at: dt.datetime) -> Path:
    """One outbox file, written atomically through ``.<name>.tmp``."""
    outbox.mkdir(parents=True, exist_ok=True)
    name = outbox_name(marker.type, at)
    payload = {
        "type": marker.type,
        "content": marker.content,
        "attrs": marker.attrs,
        "session_id": session_id,
        "agent_name": agent_name,
        "project": project,
        "ts": at.isoformat(),
    }
    tmp = outbox / f".{name}.tmp"
    tmp.write_text(json.dumps(payload, indent=2))
    return tmp.replace(outbox / name)


@dataclass
class DrainResult:
    delivered: list[str] = field(default_factory=list)
    quarantined: list[str] = field(default_factory=list)
    stopped_at: str | None = None


@dataclass
class StopResult:
    drain: DrainResult
    markers: list[Marker]
    posted: int
    buffered: list[Path]


class BrainWriter:
    """The Stop hook's writer: drain the outbox, post the transcript's first markers, buffer what failed."""

    def __init__(self, http: BrainHttp, outbox: Path, *, agent_name: str | None = None, project_dir: str = "", max_markers: int = MAX_MARKERS) -> None:
        self.http = http
        self.outbox = outbox
        self.agent_name = agent_name  # AGENTICORE_AGENT_NAME of this hook process
        self.project_dir = project_dir  # CLAUDE_PROJECT_DIR
        self.max_markers = max_markers

    def post_marker(self, marker: Marker, session_id: str) -> dict[str, Any] | None:
        """One POST; the answer when it counts as success (non-null and ``ok`` truthy), else None."""
        body, key = marker_request(marker, session_id, self.agent_name)
        response = self.http.post("/marker", body=body, idempotency_key=key)
        return response if response and response.get("ok") else None

    def buffer(self, markers: list[Marker], session_id: str, at: dt.datetime | None = None) -> list[Path]:
        at = at or dt.datetime.now(dt.timezone.utc)
        name = self.agent_name if self.agent_name is not None else "unknown"
        return [write_outbox_file(self.outbox, m, session_id, agent_name=name, project=self.project_dir, at=at) for m in markers]

    def drain(self) -> DrainResult:
        """Sorted files; unparseable ones renamed ``.bad``; stop at the first refused POST; delete on success."""
        result = DrainResult()
        if not self.http.base_url or not self.outbox.is_dir():
            return result
        for path in sorted(self.outbox.glob("*.json")):
            try:
                payload = json.loads(path.read_text())
                marker = Marker(payload["type"], payload["content"], dict(payload.get("attrs") or {}))
            except (OSError, KeyError, TypeError, AttributeError, ValueError):
                path.rename(path.with_name(path.name + ".bad"))
                result.quarantined.append(path.name)
                continue
            if self.post_marker(marker, payload.get("session_id", "")) is None:
                result.stopped_at = path.name
                break
            path.unlink(missing_ok=True)
            result.delivered.append(path.name)
        return result

    def on_stop(self, session_id: str, transcript: Path | None, last_message: str = "") -> StopResult:
        drained = self.drain()
        markers = find_markers(transcript_text(transcript))[: self.max_markers] if transcript else []
        if not markers and last_message:
            markers = find_markers(last_message)[: self.max_markers]
        failed = [m for m in markers if self.post_marker(m, session_id) is None]
        buffered = self.buffer(failed, session_id) if failed else []
        return StopResult(drained, markers, len(markers) - len(failed), buffered)
