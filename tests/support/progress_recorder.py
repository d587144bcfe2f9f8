"""A ``brain_core.progress.Progress`` for tests: it keeps every step and line a job reports, and can act on one
(another writer going on while the job runs)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class ProgressRecorder:
    """Steps and lines as the job reported them; ``on_step`` and ``on_say`` run after each is recorded."""

    on_step: Callable[[int, int], None] | None = None
    on_say: Callable[[str], None] | None = None
    steps: list[tuple[int, int]] = field(default_factory=list)
    said: list[str] = field(default_factory=list)

    def step(self, done: int, total: int) -> None:
        self.steps.append((done, total))
        if self.on_step is not None:
            self.on_step(done, total)

    def say(self, message: str) -> None:
        self.said.append(message)
        if self.on_say is not None:
            self.on_say(message)
