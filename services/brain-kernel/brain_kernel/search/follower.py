"""Bringing the search index up to files markers wrote, off the marker's path and coalesced.

Every marker of a day goes to one log, and indexing an append takes that
log's document row (``search_docs``): done in each marker's request, the
markers queued on it (55 lessons/s, p50 450 ms with 32 clients at a year of
history). A process keeps one ``SearchFollower`` instead: a request hands it
the path and answers; its thread indexes every path handed to it since its
last pass in one short transaction, at most one pass per quarter second, so
a burst of markers to one log costs one index write per pass, not one per
marker (a pass reads the log whole to check what it holds). A search in the same process
first waits (briefly) for the paths handed over before it, so a client reads
its own writes there; another process may lag by one pass. A pass that fails
only delays search: the next tick re-reads every file whose size or mtime
moved (``search_docs.rebuild_documents``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger("brain.search_follow")


class SearchFollower:
    """A background thread that runs ``follow(paths)`` for the paths handed to it, batched."""

    def __init__(self, follow: Callable[[list[str]], None], *, interval: float = 0.25) -> None:
        self._follow = follow
        self._interval = interval  # least time between passes: a pass reads each log whole, a burst must not keep it reading
        self._pending: set[str] = set()
        self._busy = False
        self._closed = False
        self._waiting = 0  # flush() callers: a pass for them does not wait out the interval
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def notify(self, path: str) -> None:
        """Hand over a path to index (returns at once)."""
        with self._cond:
            if self._closed:
                return
            self._pending.add(path)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="brain-search-follow", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def flush(self, timeout: float = 2.0) -> bool:
        """Wait until every path handed over so far is indexed (at most ``timeout`` seconds); True when it is."""
        with self._cond:
            self._waiting += 1
            self._cond.notify_all()
            try:
                return self._cond.wait_for(lambda: not self._pending and not self._busy, timeout=timeout)
            finally:
                self._waiting -= 1

    def close(self, timeout: float = 5.0) -> None:
        """Index what is pending, then stop the thread."""
        self.flush(timeout)
        with self._cond:
            self._closed = True
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
                if not self._pending:
                    return
                paths, self._pending = sorted(self._pending), set()
                self._busy = True
            try:
                self._follow(paths)
            except Exception:  # search lags until the next tick; the writes stand
                log.exception("search index not brought up to %d file(s)", len(paths))
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
