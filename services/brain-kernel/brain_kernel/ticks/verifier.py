"""Signal verifiers (``<!-- @signal verify="<cmd>" -->``): an operator-allowed command that says a claim is false.

Upstream ran the attribute as shell, from vault text, several times a tick
(UPSTREAM.md 8 items 9 and 15). Here a verifier runs only when
``BRAIN_VERIFIER_ENABLED`` is on and the command, exactly as written, is one
of ``BRAIN_VERIFY_COMMANDS``; it is split into argv (``shlex``) and run
without a shell, with ``LANG=C``, a timeout (``BRAIN_VERIFY_TIMEOUT_S``) and
no input, at most once per tick (the ``Verifier`` caches by command). Exit 0
means the claim is false: the signal is mitigated. Any other exit keeps it,
and so do a timeout or a command that cannot start.
"""

from __future__ import annotations

import shlex
import subprocess
from dataclasses import dataclass, field

from brain_kernel.settings import Settings, environ_snapshot

PASS, FAIL, SKIP, ERROR = "pass", "fail", "skip", "error"


@dataclass
class Verifier:
    """Runs allowed verify commands once each; ``check`` answers pass, fail, skip or error."""

    enabled: bool
    allowed: frozenset[str]
    timeout_s: float
    results: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_settings(cls, settings: Settings, *, dry_run: bool = False) -> Verifier:
        """A verifier as configured; a dry run never runs a command."""
        return cls(settings.verifier_enabled and not dry_run, frozenset(c.strip() for c in settings.verify_commands), settings.verify_timeout_s)

    def check(self, command: str) -> str:
        """The outcome of one verify command (cached for this tick)."""
        command = command.strip()
        if not self.enabled or command not in self.allowed:
            return SKIP
        if command not in self.results:
            self.results[command] = self._run(command)
        return self.results[command]

    def _run(self, command: str) -> str:
        try:
            argv = shlex.split(command)
        except ValueError:
            return ERROR
        if not argv:
            return ERROR
        env = {"LANG": "C", "LC_ALL": "C", "PATH": environ_snapshot().get("PATH", "/usr/bin:/bin")}
        try:
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=self.timeout_s, env=env, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return ERROR
        return PASS if done.returncode == 0 else FAIL
