"""brain_retract, brain_expire and brain_supersede through a kernel's HTTP API (``brain mcp --remote``): the answers the in-process tools give."""

from __future__ import annotations

from brain_mcp.remote import Remote
from tests.support.harness import Served


def test_remote_retract_and_supersede(served: Served) -> None:
    remote = Remote(served.base, None)
    try:
        old = remote.brain_marker("lesson", "Pin the base image.", {"repo": "acme/api"})
        missing = "lesson:left/reference/lessons-2026-01-01.md#0000"
        assert remote.brain_supersede(missing, "lesson", "x", None) == {"error": "entry not found", "status": 404}
        assert remote.brain_retract(missing, "why")["error"] == "entry not found"
        new = remote.brain_supersede(old["entry_id"], "lesson", "Pin the base image by digest.", {"repo": "acme/api", "title": "Pin by digest"})
        assert new["supersedes"] == [old["entry_id"]] and new["project"] == "api"
        done = remote.brain_retract(new["entry_id"], "digests broke security updates")
        assert done["entry"]["state"] == "retracted" and [e["action"] for e in done["history"]][-1] == "retracted"
        feed = remote.brain_feed("acme/api")
        [lessons] = [e for e in feed["entries"] if e["id"] == "lessons"]  # the successor retracted, the old one is back (ADR 0060)
        assert lessons["metadata"]["entry_ids"] == [old["entry_id"]]
        assert remote.brain_expire(missing, "why")["error"] == "entry not found"
        expired = remote.brain_expire(old["entry_id"], "the base image is gone")
        assert expired["entry"]["state"] == "expired" and expired["history"][-1]["reason"] == "the base image is gone"
        assert not any(e["id"] == "lessons" for e in remote.brain_feed("acme/api")["entries"])
    finally:
        remote.close()
