"""The hook's outbox: one JSON file per marker, written atomically, drained oldest first.

Every marker goes through it: the stop hook writes each new marker here, then
drains. A file is ``<ns>-<key>.json`` so names sort oldest first and a key is
queued once. A 2xx answer (a replay included) records the key under ``sent/``
and removes the file; a refusal (4xx but 401, 408, 429) moves it to
``refused/`` with the answer, never retried; anything else (network, 5xx, a
spent budget) leaves it and stops the drain until the next hook. An
unreadable file goes to ``refused/`` and the drain goes on.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path

from brain_cli.hook.kernel import Kernel

RETRYABLE_4XX = {401, 408, 429}


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

    def add(self, key: str, marker: dict[str, object]) -> bool:
        """Queue one marker under its key unless it was sent, refused or is queued already; whether it was queued."""
        if self.was_sent(key) or any(p.name.endswith(f"-{key}.json") for p in [*self.queued(), *self.refused.glob(f"*-{key}.json")]):
            return False
        write_atomic(self.folder / f"{time.time_ns():020d}-{key}.json", {"key": key, "marker": marker})
        return True

    def _refuse(self, path: Path, reason: object) -> None:
        try:
            original: object = json.loads(path.read_text())
        except (OSError, ValueError):
            original = None
        write_atomic(self.refused / path.name, {"refused": reason, "queued": original})
        with contextlib.suppress(OSError):
            path.unlink()

    def drain(self, kernel: Kernel) -> tuple[int, int]:
        """Post every waiting marker, oldest first, until one cannot be sent now: (sent, refused)."""
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
            answer = kernel.call("POST", "/marker", marker, {"X-Idempotency-Key": key})
            if 200 <= answer.status < 300:
                self.sent.mkdir(parents=True, exist_ok=True)
                (self.sent / key).touch()
                with contextlib.suppress(OSError):
                    path.unlink()
                sent += 1
            elif 400 <= answer.status < 500 and answer.status not in RETRYABLE_4XX:
                body = answer.json()
                self._refuse(
                    path, {"status": answer.status, "detail": body.get("detail") if isinstance(body, dict) else answer.body.decode(errors="replace")[:500]}
                )
                refused += 1
            else:
                break
        return sent, refused
