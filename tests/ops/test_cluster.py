"""Clustering: the pure plan and arc format, and ``brain cluster`` writing arcs into a vault."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import yaml
from sqlalchemy import select
from sqlalchemy.orm import Session

from brain_core.arcs import ArcSession, arc_title, cluster_id_for, plan_clusters, render_arc
from brain_core.vault import frontmatter
from brain_core.vault.records import arc_record_of
from brain_kernel.db.models import Entry
from brain_kernel.vault_store import Vault
from brain_ops.cluster import ExistingArcs, run_cluster
from tests.ops.test_extract import NOW, T0, World
from tests.support.harness import brain

H = dt.timedelta(hours=1)
# A new arc's frontmatter keys, in DESIGN section 6 order.
ARC_KEYS = (
    "cluster_id",
    "title",
    "region",
    "status",
    "heat",
    "source_sessions",
    "project",
    "projects",
    "repo",
    "worktrees",
    "cwd",
    "git_branch",
    "project_source",
    "created",
    "signals",
    "edges",
    "synthesized",
)


def s(sid: str, start: dt.datetime, *, project: str | None = "api", repo: str | None = "acme/api", minutes: int = 30, **kw: object) -> ArcSession:
    return ArcSession(
        session_id=sid,
        project=project,
        repo=repo,
        start=start,
        end=start + dt.timedelta(minutes=minutes),
        project_source=str(kw.pop("project_source", "git" if project else "unresolved")),
        **kw,
    )  # type: ignore[arg-type]


# -- the plan (pure) -------------------------------------------------------------


def test_cluster_ids_are_stable_and_order_free() -> None:
    assert cluster_id_for(["b", "a"]) == cluster_id_for(["a", "b", "a"])
    assert cluster_id_for(["a"]) != cluster_id_for(["a", "b"])
    plans1 = plan_clusters([s("x", T0), s("y", T0 + H)])
    plans2 = plan_clusters([s("y", T0 + H), s("x", T0)])
    assert [p.cluster_id for p in plans1] == [p.cluster_id for p in plans2]


def test_worktree_and_primary_checkout_share_an_arc_when_close_in_time() -> None:
    plans = plan_clusters([s("main", T0, cwd="/h/dev/api"), s("wt", T0 + H, cwd="/h/wt/api-feature", worktree="api-feature")])
    assert len(plans) == 1
    plan = plans[0]
    assert plan.project == "api" and plan.repo == "acme/api" and plan.projects == ("api",)
    assert plan.worktrees == ("api-feature",)
    assert plan.session_ids == ["main", "wt"]


def test_same_named_repos_never_share_an_arc() -> None:
    plans = plan_clusters([s("a", T0), s("b", T0 + H, repo="org2/api")])
    assert sorted(p.repo for p in plans) == ["acme/api", "org2/api"]


def test_time_gap_splits_and_a_resumed_session_bridges_it() -> None:
    sessions = [s("a", T0), s("b", T0 + 6 * H)]
    assert len(plan_clusters(sessions)) == 2
    resumed = [s("a", T0), s("b", T0 + 6 * H, resumed=True)]
    assert len(plan_clusters(resumed)) == 1
    assert len(plan_clusters([s("a", T0), s("b", T0 + 48 * H, resumed=True)])) == 2


def test_unattributed_sessions_stay_apart_from_projects_and_each_other() -> None:
    plans = plan_clusters([s("p", T0), s("h1", T0, project=None, repo=None, cwd="/h"), s("h2", T0, project=None, repo=None, cwd="/tmp/x")])
    assert len(plans) == 3
    loose = [p for p in plans if p.project is None]
    assert all(p.repo is None and p.projects == () and p.project_source == "unresolved" for p in loose)


def test_layout_session_joins_the_only_repo_with_its_key() -> None:
    plans = plan_clusters([s("repo", T0), s("scratch", T0 + H, repo=None, project_source="layout")])
    assert len(plans) == 1 and plans[0].repo == "acme/api" and plans[0].project_source == "git"
    twins = plan_clusters([s("a", T0), s("b", T0, repo="org2/api"), s("scratch", T0 + H, repo=None, project_source="layout")])
    assert len(twins) == 3  # ambiguous key: the scratch session joins neither


def test_titles_skip_boilerplate_headings_paths_and_noise() -> None:
    def title(*prompts: str) -> str:
        return arc_title([ArcSession(session_id=f"t{i}", first_user_prompt=p, start=T0, project="api") for i, p in enumerate(prompts)])

    assert title("<command-name>/clear</command-name>", "Fix the flaky login test") == "Fix the flaky login test"
    assert title("# Design notes\n\n## Section 3\nMake the resolver cache git calls") == "Make the resolver cache git calls"
    assert title("/home/dev/src/api/src/main.py", "continue", "Port the uploader to asyncio") == "Port the uploader to asyncio"
    assert title("https://github.com/acme/api/issues/4", "Implement issue four") == "Implement issue four"
    long = title("Refactor " + "the extremely long-winded configuration loader " * 5)
    assert len(long) <= 80 and long.endswith("…") and not long[:-1].endswith(" ")
    assert title("ok", "yes").startswith("Work on api")


def test_rendered_arc_is_valid_yaml_with_every_key() -> None:
    plan = plan_clusters([s("a", T0, title_hint=None, first_user_prompt='Fix: "quoted" title --- with: colons', git_branch="fix/x")])[0]
    text = render_arc(plan)
    assert text.startswith("---\n")
    meta = yaml.safe_load(text.split("---\n")[1])
    assert list(meta) == list(ARC_KEYS)
    assert meta["title"] == 'Fix: "quoted" title --- with: colons'
    assert meta["source_sessions"] == ["a"] and meta["projects"] == ["api"] and meta["repo"] == "acme/api"
    assert meta["git_branch"] == "fix/x" and meta["project_source"] == "git"
    assert meta["edges"] == [] and meta["synthesized"] is False


def test_an_arc_index_row_reads_new_legacy_and_tombstoned_arcs() -> None:
    plan = plan_clusters([s("a", T0), s("b", T0 + H, minutes=45)])[0]
    record = arc_record_of(frontmatter.parse(render_arc(plan)), plan.vault_path)
    assert record is not None
    assert record.id == f"arc:{plan.vault_path}" and record.kind == "arc"
    assert (record.project, record.projects, record.repo) == ("api", ("api",), "acme/api")
    assert record.occurred_at == T0 + H + dt.timedelta(minutes=45)
    assert record.status == "active" and record.heat == 0.0 and record.title == plan.title

    merged = frontmatter.render(
        {
            "cluster_id": "arc-1",
            "title": "Two projects",
            "heat": 7.5,
            "status": "stalled",
            "project": "api",
            "projects": ["api", "web"],
            "summary": "A merged arc.",
        }
    )
    rec = arc_record_of(frontmatter.parse(merged), "clusters/2026-01-01/arc-1.md")
    assert rec is not None and rec.projects == ("api", "web") and rec.heat == 7.5 and rec.content == "A merged arc."

    legacy = "---\ncluster_id: c-old\ntitle: Old arc\nheat: 3\nproject: package\ncreated: 2025-01-02\n---\nbody\n"
    old = arc_record_of(frontmatter.parse(legacy), "clusters/2025-01-02/c-old.md")
    assert old is not None and old.project is None and old.projects == () and old.meta["legacy_project"] == "package"
    assert old.occurred_at == dt.datetime(2025, 1, 2, tzinfo=dt.timezone.utc)

    assert arc_record_of(frontmatter.parse(render_arc(plan)), "clusters/2026-01-01/arc-1.merged.md") is None
    assert arc_record_of(frontmatter.parse("no frontmatter at all"), "clusters/x/y.md") is not None


# -- brain cluster on a vault -----------------------------------------------------


def _bundle(world: World) -> dict:
    return world.extract()


def test_cluster_writes_one_arc_per_project_and_parses_as_yaml(tmp_path: Path) -> None:
    world = World(tmp_path)
    world.claude_session("primary", world.api)
    world.claude_session("worktree", world.worktree, start=T0 + dt.timedelta(minutes=40))
    world.codex_session("codex_sub", world.subfolder, start=T0 + dt.timedelta(minutes=50))
    world.claude_session("twin", world.other_api)
    world.claude_session("home", world.home)
    vault = tmp_path / "vault"
    summary = run_cluster(_bundle(world), vault)
    assert summary["created"] == 3 and summary["clusters"] == 3

    arcs = {}
    for path in (vault / "clusters").rglob("*.md"):
        meta = yaml.safe_load(path.read_text().split("---\n")[1])
        assert set(ARC_KEYS) <= set(meta)
        assert path.name == f"{meta['cluster_id']}.md" and path.parent.name == meta["created"][:10]
        arcs[meta["repo"]] = meta
    api = arcs["acme/api"]
    assert sorted(api["source_sessions"]) == sorted(world.ids[n] for n in ("primary", "worktree", "codex_sub"))
    assert api["project"] == "api" and api["projects"] == ["api"] and api["worktrees"] == ["api-feature"]
    assert api["title"] == "Fix the flaky login test in the auth module"
    assert api["signals"]["agents"] == ["claude", "codex"] and api["signals"]["sessions"] == 3
    assert arcs["org2/api"]["source_sessions"] == [world.ids["twin"]]
    assert arcs[None]["project"] is None and arcs[None]["projects"] == [] and arcs[None]["project_source"] == "unresolved"


def test_rerun_is_safe_and_a_growing_arc_is_extended_in_place(tmp_path: Path) -> None:
    world = World(tmp_path)
    world.claude_session("first", world.api)
    vault = tmp_path / "vault"
    run_cluster(_bundle(world), vault)
    [path] = list((vault / "clusters").rglob("*.md"))
    before = path.read_bytes()
    again = run_cluster(_bundle(world), vault)
    assert again["unchanged"] == 1 and again["created"] == 0 and path.read_bytes() == before

    # The keeper edits the arc; then a new session of the same work arrives.
    path.write_text(frontmatter.update(path.read_text(), {"heat": 8.5, "title": "Keeper title", "summary": "Kept."}))
    world.claude_session("second", world.worktree, start=T0 + dt.timedelta(minutes=45))
    grown = run_cluster(_bundle(world), vault)
    assert grown["updated"] == 1 and grown["created"] == 0
    assert list((vault / "clusters").rglob("*.md")) == [path]
    meta = yaml.safe_load(path.read_text().split("---\n")[1])
    assert sorted(meta["source_sessions"]) == sorted(world.ids.values())
    assert meta["worktrees"] == ["api-feature"] and meta["signals"]["sessions"] == 2
    assert (meta["heat"], meta["title"], meta["summary"]) == (8.5, "Keeper title", "Kept.")
    assert run_cluster(_bundle(world), vault)["unchanged"] == 1


def test_a_session_of_an_arc_the_keeper_never_reads_grows_the_live_arc(tmp_path: Path) -> None:
    """An old vault: arc X merged into Y left ``X.merged.md`` and a raw ``X.md`` beside it (upstream copied),
    both naming X's session. The tick reads neither; new activity must go to Y, which holds the session too."""
    world = World(tmp_path)
    world.claude_session("first", world.api)
    vault = tmp_path / "vault"
    run_cluster(_bundle(world), vault)
    [raw] = list((vault / "clusters").rglob("*.md"))
    sid = world.ids["first"]
    text = raw.read_text()
    (raw.parent / raw.name.replace(".md", ".merged.md")).write_text(frontmatter.update(text, {"merged_into": "arc-live"}))
    live = raw.parent / "arc-live.md"
    live.write_text(frontmatter.update(text, {"cluster_id": "arc-live", "source_sessions": [sid, "other-session"]}))
    raw_before = raw.read_bytes()
    existing = ExistingArcs.scan(Vault(vault))
    assert existing.owner[sid] == "clusters/" + live.relative_to(vault / "clusters").as_posix()
    assert {"clusters/" + raw.relative_to(vault / "clusters").as_posix()} < existing.tombstones
    again = run_cluster(_bundle(world), vault)  # the session mined again: it grows the live arc, if anything
    assert again["created"] == 0 and raw.read_bytes() == raw_before, again


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    world = World(tmp_path)
    world.claude_session("one", world.api)
    summary = run_cluster(_bundle(world), tmp_path / "vault", dry_run=True)
    assert summary["dry_run"] is True and summary["created"] == 1
    assert not (tmp_path / "vault" / "clusters").exists()


def test_extract_piped_into_cluster_through_the_cli(tmp_path: Path) -> None:
    world = World(tmp_path)
    world.claude_session("primary", world.api)
    world.codex_session("gone", world.home / "gone", start=T0 + dt.timedelta(minutes=5), repo_url="git@github.com:acme/widget.git")
    extract = brain(world.settings, "extract", "--since", "2d", "--min-turns", "1")
    assert extract.exit_code == 0, extract.stderr
    bundle = json.loads(extract.stdout)
    assert bundle["sessions_returned"] == 2
    out = tmp_path / "vault" / "clusters"  # the clusters folder is accepted as well as the vault root (the vault must exist)
    out.parent.mkdir(exist_ok=True)
    cluster = brain(world.settings, "cluster", "--out-dir", str(out), input=extract.stdout)
    assert cluster.exit_code == 0, cluster.stderr
    summary = json.loads(cluster.stdout)
    assert summary["created"] == 2
    files = sorted(out.rglob("*.md"))
    assert len(files) == 2 and all(f.parent.parent == out for f in files)
    repos = {yaml.safe_load(f.read_text().split("---\n")[1])["repo"] for f in files}
    assert repos == {"acme/api", "acme/widget"}

    bad = brain(world.settings, "cluster", "--out-dir", str(out), input="not json")
    assert bad.exit_code == 2 and bad.stderr.startswith("error: the bundle is not JSON") and "Traceback" not in bad.stderr


def test_cluster_with_a_database_indexes_the_arcs(tmp_path: Path, database_url: str, db: Session) -> None:
    world = World(tmp_path, database_url)
    world.claude_session("primary", world.api)
    world.claude_session("twin", world.other_api)
    run_cluster(_bundle(world), tmp_path / "vault", db=db)
    db.commit()
    rows = {r.repo: r for r in db.scalars(select(Entry).where(Entry.kind == "arc"))}
    assert set(rows) == {"acme/api", "org2/api"}
    assert rows["acme/api"].project == "api" and rows["acme/api"].projects == ["api"]
    assert rows["acme/api"].occurred_at is not None and rows["acme/api"].occurred_at <= NOW
