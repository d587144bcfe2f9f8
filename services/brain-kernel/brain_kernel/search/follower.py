"""Bringing the search index up to what a process wrote, off the request and coalesced.

Every marker of a day goes to one log, and indexing an append takes that
log's document row (``search_docs``): done in each marker's request, the
markers queued on it (55 lessons/s, p50 450 ms with 32 clients at a year of
history). A process keeps one ``Follower`` for the search documents instead:
a request hands it the path and answers; its thread indexes every path
handed to it since its last pass in one short transaction, at most one pass
per quarter second, so a burst of markers to one log costs one index write
per pass, not one per marker (a pass reads the log whole to check what it
holds). A search in the same process first waits (briefly) for the paths
handed over before it, so a client reads its own writes there; another
process may lag by one pass. A pass that fails only delays search: the next
tick re-reads every file whose size or mtime moved
(``search_docs.rebuild_documents``).

The API keeps a second one for the vectors (``embed_run.embed_follow``, ADR
0067): a pass embeds what is pending a moment after a burst of markers, and
asks for another pass while more wait. Its pending work is not drained at
shutdown (``drain=False``): the next tick embeds it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger("brain.search_follow")


class Follower:
    """A background thread that runs ``follow(paths)`` for the paths handed to it, batched.

    ``follow`` may return True to ask for another pass after the interval
    with nothing new handed over (work left, or a lock another process held).
    """

    def __init__(self, follow: Callable[[list[str]], bool | None], *, interval: float = 0.25, drain: bool = True, name: str = "brain-search-follow") -> None:
        self._follow = follow
        self._interval = interval  # least time between passes: a pass reads each log whole, a burst must not keep it reading
        self._drain = drain  # close() runs what is pending first
        self._name = name
        self._pending: set[str] = set()
        self._busy = False
        self._closed = False
        self._waiting = 0  # flush() callers: a pass for them does not wait out the interval
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def notify(self, path: str) -> None:
        """Hand over a path to follow (returns at once)."""
        with self._cond:
            if self._closed:
                return
            self._pending.add(path)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def flush(self, timeout: float = 2.0) -> bool:
        """Wait until every path handed over so far is followed (at most ``timeout`` seconds); True when it is."""
        with self._cond:
            self._waiting += 1
            self._cond.notify_all()
            try:
                return self._cond.wait_for(lambda: not self._pending and not self._busy, timeout=timeout)
            finally:
                self._waiting -= 1

    def close(self, timeout: float = 5.0) -> None:
        """Stop the thread: after a pass for what is pending (``drain``), else after the pass under way."""
        if self._drain:
            self.flush(timeout)
        with self._cond:
            self._closed = True
            self._pending.clear()
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        first = True
        while True:
            with self._cond:
                if not first:  # paths handed over meanwhile wait for the next pass, unless a search is waiting
                    self._cond.wait_for(lambda: self._closed or self._waiting > 0, timeout=self._interval)
                first = False
                self._cond.wait_for(lambda: self._pending or self._closed)
                if self._closed or not self._pending:
                    return
                paths, self._pending = sorted(self._pending), set()
                self._busy = True
            again = False
            try:
                again = bool(self._follow(paths))
            except Exception:  # the follower's store lags until the next tick; the writes stand
                log.exception("%s: %d path(s) not followed", self._name, len(paths))
            finally:
                with self._cond:
                    self._busy = False
                    if again and not self._closed:
                        self._pending.update(paths)
                    self._cond.notify_all()
