"""The backfill's pure decisions (``brain_core.backfill``): majority, clear against unverifiable, minimal edits."""

from __future__ import annotations

from brain_core.backfill import CLEARED, KNOWLEDGE, RESOLVED, UNVERIFIABLE, SessionEvidence, arc_changes, decide, edit_arc, legacy_project, session_table
from brain_core.identity import ProjectIdentity, unresolved
from brain_core.membership import KnownProject
from brain_core.vault import frontmatter


def _git(key: str, repo: str | None, worktree: str | None = None, source: str = "git") -> ProjectIdentity:
    return ProjectIdentity(key, repo, f"/r/{key}", worktree, f"/r/{key}", source)


def test_the_primary_project_has_most_sessions_then_most_activity_and_every_project_is_kept() -> None:
    api, web = _git("api", "acme/api"), _git("web", "acme/web", "web-fix")
    by_sessions = decide([SessionEvidence("a", api, 1), SessionEvidence("b", web, 50), SessionEvidence("c", api, 1)])
    assert (by_sessions.outcome, by_sessions.project, by_sessions.projects, by_sessions.repo) == (RESOLVED, "api", ("api", "web"), "acme/api")
    assert by_sessions.worktrees == ("web-fix",) and by_sessions.sessions_used == ("a", "b", "c")
    by_activity = decide([SessionEvidence("a", api, 1), SessionEvidence("b", web, 50)])
    assert (by_activity.project, by_activity.repo) == ("web", "acme/web")
    assert decide([SessionEvidence("a", web, 1), SessionEvidence("b", api, 1)]).project == "api"  # a tie: the smaller id, every run alike


def test_a_key_only_session_joins_the_one_repo_of_its_key_and_the_strongest_source_wins() -> None:
    layout = ProjectIdentity("api", None, None, None, "/s/api/t", "layout")
    got = decide([SessionEvidence("a", layout), SessionEvidence("b", layout), SessionEvidence("c", _git("api", "acme/api", source="session"))])
    assert (got.project, got.projects, got.repo, got.source) == ("api", ("api",), "acme/api", "session")


def test_no_project_everywhere_clears_missing_evidence_is_unverifiable_and_legacy_counts_only_when_unique() -> None:
    assert decide([]).outcome == KNOWLEDGE
    assert decide([SessionEvidence("a", unresolved("/home/u")), SessionEvidence("b", unresolved("/tmp/x"))]).outcome == CLEARED
    assert decide([SessionEvidence("a", unresolved("/home/u")), SessionEvidence("b", None)]).outcome == UNVERIFIABLE
    known = [KnownProject("api", "acme/api"), KnownProject("web", "org1/web"), KnownProject("web", "org2/web")]
    assert legacy_project({"project": "API"}, known) == known[0]
    assert legacy_project({"project": "web"}, known) is None  # two repositories carry the key
    assert legacy_project({"project": "api", "project_source": "git"}, known) is None  # not a legacy arc
    got = decide([SessionEvidence("a", None)], legacy=known[0])
    assert (got.outcome, got.project, got.repo, got.source) == (RESOLVED, "api", "acme/api", "legacy")


def test_changes_touch_only_what_differs_and_a_rerun_or_a_reordered_list_changes_nothing() -> None:
    decision = decide([SessionEvidence("a", _git("api", "acme/api")), SessionEvidence("b", _git("web", "acme/web"))])
    legacy = {"project": "src", "source_sessions": ["a", "b"]}
    assert arc_changes(legacy, decision) == {"project": "api", "projects": ["api", "web"], "repo": "acme/api", "project_source": "git", "worktrees": []}
    done = {**legacy, **arc_changes(legacy, decision)}
    assert arc_changes(done, decision) == {}
    assert arc_changes({**done, "projects": ["web", "api"]}, decision) == {}  # a merge's order stands
    assert arc_changes({**done, "project_source": "session"}, decision) == {}  # the same projects through other evidence
    assert arc_changes(done, decide([SessionEvidence("a", None)])) == {}


def test_the_edit_keeps_every_other_byte_including_comments_and_crlf() -> None:
    text = "---\r\n# kept comment\r\ntitle: 'a: b'\r\nproject: src\r\nsummary: |\r\n  two\r\n  lines\r\n---\r\nbody\r\n"
    out, doc = edit_arc(text, frontmatter.parse(text), {"project": "api", "projects": ["api"]})
    assert out == "---\r\n# kept comment\r\ntitle: 'a: b'\r\nproject: api\r\nsummary: |\r\n  two\r\n  lines\r\nprojects: [api]\r\n---\r\nbody\r\n"
    assert doc == frontmatter.parse(out) and doc.meta["projects"] == ["api"]


def test_the_session_table_gives_each_sessions_folder_and_turns() -> None:
    body = (
        "# T\n\n## Sessions\n\n| Session | Agent | Start | Minutes | Turns | Tools | Folder | Branch |\n|---|---|---|---|---|---|---|---|\n"
        "| s1 | claude | 2026-11-20T09:00 | 3 | 12 | 4 | /home/u/dev/api/src | main |\n| s2 | codex | | 0 | 2 | 0 | | |\n\nafter\n| x | y |\n"
    )
    rows = session_table(body)
    assert rows["s1"].folder == "/home/u/dev/api/src" and rows["s1"].turns == 12
    assert rows["s2"].folder is None and set(rows) == {"s1", "s2"}
