"""The hook's outbox: one JSON file per marker, written atomically, drained oldest first.

Every marker goes through it: the stop hook writes each new marker here, then
drains. A file is ``<ns>-<key>.json`` so names sort oldest first and a key is
queued once; it names the client file whose kernel it was queued for, and
only a hook reading that client file sends it (two client files, two kernels:
a team's decision must not reach another team's kernel). A 2xx answer (a replay
included) records the key under ``sent/`` and removes the file. The kernel's
refusal (a 4xx but 401, 408, 429, with the kernel's JSON ``detail``) moves it
to ``refused/`` with the answer, never retried. A 500 is this marker's fault:
the drain goes on with the next, and after ``MAX_FAULTS`` such answers the
marker moves to ``refused/`` too, so one marker the kernel cannot take never
holds back the others. Anything else (network, 502 to 504, a spent budget, a
proxy's 4xx that is not the kernel's) leaves it and stops the drain until the
next hook. An unreadable file goes to ``refused/`` and the drain goes on.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path

from brain_cli.hook.kernel import Answer, Kernel

RETRYABLE_4XX = {401, 408, 429}
UNAVAILABLE = {502, 503, 504}  # the kernel (or the way to it) is down: no other marker would fare better now
MAX_FAULTS = 5
STALE_TEMP_SECONDS = 600  # far past any hook's budget: a temp file this old has no writer left


def write_atomic(path: Path, data: object) -> None:
    """Temp file and rename, so a reader (or a killed hook) never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temp.write_text(json.dumps(data, ensure_ascii=False))
    os.replace(temp, path)


class Outbox:
    """The per-user outbox under the state folder."""

    def __init__(self, state: Path) -> None:
        self.folder = state / "outbox"
        self.refused = self.folder / "refused"
        self.sent = state / "sent"

    def was_sent(self, key: str) -> bool:
        """Whether the kernel already took ``key`` (so a rerun of a stop posts nothing)."""
        return (self.sent / key).exists()

    def queued(self) -> list[Path]:
        """The waiting markers, oldest first."""
        try:
            return sorted(p for p in self.folder.iterdir() if p.suffix == ".json" and not p.name.startswith("."))
        except OSError:
            return []

    def add(self, key: str, marker: dict[str, object], client: str | None = None) -> bool:
        """Queue one marker under its key for the kernel of ``client`` (a client file; None: the next kernel any
        hook reaches) unless it was sent, refused or is queued already; whether it was queued."""
        if self.was_sent(key) or any(p.name.endswith(f"-{key}.json") for p in [*self.queued(), *self.refused.glob(f"*-{key}.json")]):
            return False
        item: dict[str, object] = {"key": key, "marker": marker}
        if client is not None:
            item["client"] = client
        write_atomic(self.folder / f"{time.time_ns():020d}-{key}.json", item)
        return True

    def _forget_stale_temps(self) -> None:
        """Remove the temp files of hooks stopped at their budget between the write and the rename (a marker in one is
        queued again by its session's next stop, which reads the transcript): older than ``STALE_TEMP_SECONDS``."""
        cutoff = time.time() - STALE_TEMP_SECONDS
        with contextlib.suppress(OSError):
            for temp in self.folder.glob(".*.tmp"):
                with contextlib.suppress(OSError):
                    if temp.stat().st_mtime < cutoff:
                        temp.unlink()

    def _refuse(self, path: Path, reason: object) -> None:
        try:
            original: object = json.loads(path.read_text())
        except (OSError, ValueError):
            original = None
        write_atomic(self.refused / path.name, {"refused": reason, "queued": original})
        with contextlib.suppress(OSError):
            path.unlink()

    def drain(self, kernel: Kernel) -> tuple[int, int]:
        """Post every waiting marker queued for this kernel, oldest first, until the kernel cannot be reached: (sent, refused)."""
        self._forget_stale_temps()
        sent = refused = 0
        for path in self.queued():
            try:
                item = json.loads(path.read_text())
                key, marker = item["key"], item["marker"]
                if not isinstance(key, str) or not isinstance(marker, dict):
                    raise ValueError("no key or marker")
            except FileNotFoundError:
                continue  # another hook drained it
            except (OSError, ValueError, KeyError, TypeError) as error:
                self._refuse(path, {"status": None, "detail": f"unreadable outbox file: {error}"})
                refused += 1
                continue
            if item.get("client") not in (None, kernel.client):
                continue  # queued for the kernel another client file names
            answer = kernel.call("POST", "/marker", marker, {"X-Idempotency-Key": key})
            if 200 <= answer.status < 300:
                self.sent.mkdir(parents=True, exist_ok=True)
                (self.sent / key).touch()
                with contextlib.suppress(OSError):
                    path.unlink()
                sent += 1
            elif (reason := _kernel_refusal(answer)) is not None:
                self._refuse(path, {"status": answer.status, "detail": reason})
                refused += 1
            elif answer.status >= 500 and answer.status not in UNAVAILABLE:
                faults = int(item.get("faults") or 0) + 1
                if faults >= MAX_FAULTS:
                    self._refuse(path, {"status": answer.status, "detail": answer.body.decode(errors="replace")[:500], "faults": faults})
                    refused += 1
                else:
                    write_atomic(path, {**item, "faults": faults})
            else:
                break
        return sent, refused


def _kernel_refusal(answer: Answer) -> object:
    """The ``detail`` of the kernel's own no to this marker (a 4xx but 401, 408, 429, with its JSON ``detail``), else
    None. A 4xx without it comes from something in between (a proxy's 426 to HTTP/1.0, a gateway's HTML 404): the
    marker waits."""
    body = answer.json()
    if 400 <= answer.status < 500 and answer.status not in RETRYABLE_4XX and isinstance(body, dict) and body.get("detail") is not None:
        return body["detail"]
    return None
