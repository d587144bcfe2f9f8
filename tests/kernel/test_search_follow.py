"""The search follower: markers hand it paths and answer; it indexes them in batches, off their requests."""

from __future__ import annotations

import threading

from brain_kernel.search.follower import Follower


def test_paths_handed_over_during_a_pass_are_indexed_together_in_the_next() -> None:
    started, release = threading.Event(), threading.Event()
    calls: list[list[str]] = []

    def follow(paths: list[str]) -> None:
        calls.append(paths)
        if len(calls) == 1:
            started.set()
            assert release.wait(5)

    follower = Follower(follow)
    follower.notify("left/reference/lessons-2026-12-01.md")
    assert started.wait(5)
    assert not follower.flush(timeout=0.01)  # a pass is running: not yet
    for rel in ("left/reference/lessons-2026-12-01.md", "amygdala/x.md", "left/reference/lessons-2026-12-01.md"):
        follower.notify(rel)
    release.set()
    assert follower.flush(timeout=5)
    assert calls == [["left/reference/lessons-2026-12-01.md"], ["amygdala/x.md", "left/reference/lessons-2026-12-01.md"]]
    follower.close()
    follower.notify("after/close.md")  # ignored once closed
    assert calls[-1] == ["amygdala/x.md", "left/reference/lessons-2026-12-01.md"]


def test_a_failing_pass_is_logged_and_the_next_one_runs(caplog) -> None:
    calls: list[list[str]] = []

    def follow(paths: list[str]) -> None:
        calls.append(paths)
        if paths == ["bad.md"]:
            raise RuntimeError("database gone")

    follower = Follower(follow)
    follower.notify("bad.md")
    assert follower.flush(timeout=5)
    follower.notify("good.md")
    assert follower.flush(timeout=5)
    follower.close()
    assert calls == [["bad.md"], ["good.md"]]
    assert "brain-search-follow: 1 path(s) not followed" in caplog.text
