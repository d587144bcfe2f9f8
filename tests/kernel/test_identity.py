"""Identity resolution on real repositories, worktrees and submodules built in temporary folders."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from brain_core.identity import ProjectIdentity
from brain_kernel.db.models import LearnedRoot, Project
from brain_kernel.identity.projects import lookup_project
from brain_kernel.identity.resolver import IdentityResolver
from brain_kernel.identity.sessions import record_session
from brain_kernel.settings import Settings
from tests.support.gitrepo import add_submodule, add_worktree, git, make_repo
from tests.support.harness import brain, make_settings


def _settings(tmp_path: Path, database_url: str | None = None, **overrides: object) -> Settings:
    return make_settings(tmp_path, database_url, **overrides)


def _whereis(settings: Settings, *paths: str, extra: tuple[str, ...] = ()) -> list[dict]:
    """Run ``brain whereis`` and parse its JSON lines."""
    proc = brain(settings, "whereis", *paths, *extra)
    assert proc.exit_code == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def _ident(res: ProjectIdentity) -> tuple:
    return (res.project, res.repo, res.root, res.worktree, res.source)


def test_primary_checkout_and_linked_worktree_are_one_project(tmp_path: Path) -> None:
    home = tmp_path / "home"
    repo = make_repo(home / "dev" / "openrig", "https://github.com/acme/openrig.git")
    wt = add_worktree(repo, home / "trees" / "openrig-fix", "fix")
    resolver = IdentityResolver(_settings(tmp_path))
    primary, linked = resolver.resolve(str(repo)), resolver.resolve(str(wt))
    assert _ident(primary) == ("openrig", "acme/openrig", str(repo), None, "git")
    assert _ident(linked) == ("openrig", "acme/openrig", str(repo), "openrig-fix", "git")
    assert linked.cwd == str(wt)


def test_worktree_of_a_repo_without_remote_keys_on_the_main_root(tmp_path: Path) -> None:
    home = tmp_path / "home"
    repo = make_repo(home / "dev" / "tooling")
    wt = add_worktree(repo, home / "elsewhere" / "tooling-experiment", "exp")
    hit = IdentityResolver(_settings(tmp_path)).resolve(str(wt / "."))
    assert _ident(hit) == ("tooling", None, str(repo), "tooling-experiment", "git")


def test_subfolder_two_levels_down_resolves_to_its_repo(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "home" / "dev" / "agentihooks", "git@github.com:the-cloud-clockwork/agentihooks.git")
    deep = repo / "src" / "hooks"
    deep.mkdir(parents=True)
    hit = IdentityResolver(_settings(tmp_path)).resolve(str(deep))
    assert _ident(hit) == ("agentihooks", "the-cloud-clockwork/agentihooks", str(repo), None, "git")
    assert hit.cwd == str(deep)


def test_clone_in_a_differently_named_folder_takes_the_remote_name(tmp_path: Path) -> None:
    clone = make_repo(tmp_path / "home" / "dev" / "openrig-clone", "https://github.com/acme/openrig.git")
    hit = IdentityResolver(_settings(tmp_path)).resolve(str(clone))
    assert (hit.project, hit.repo, hit.root) == ("openrig", "acme/openrig", str(clone))


def test_repo_without_remote_resolves_to_its_root_basename(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "home" / "dev" / "Local-Only")
    (repo / "a").mkdir()
    hit = IdentityResolver(_settings(tmp_path)).resolve(str(repo / "a"))
    assert _ident(hit) == ("local-only", None, str(repo), None, "git")


def test_only_remote_not_named_origin_is_used_and_origin_wins_over_others(tmp_path: Path) -> None:
    home = tmp_path / "home"
    single = make_repo(home / "dev" / "single")
    git(single, "remote", "add", "upstream", "git@github.com:acme/single-up.git")
    both = make_repo(home / "dev" / "both", "git@github.com:me/fork.git")
    git(both, "remote", "add", "upstream", "git@github.com:acme/upstream.git")
    resolver = IdentityResolver(_settings(tmp_path))
    assert resolver.resolve(str(single)).repo == "acme/single-up"
    assert resolver.resolve(str(both)).repo == "me/fork"


def test_two_api_repos_get_different_slugs_and_a_short_lookup_is_ambiguous(tmp_path: Path, database_url: str, db: Session) -> None:
    home = tmp_path / "home"
    one = make_repo(home / "dev" / "org1" / "api", "git@github.com:org1/api.git")
    two = make_repo(home / "work" / "api", "https://gitlab.com/org2/api")
    resolver = IdentityResolver(_settings(tmp_path, database_url), db)
    a, b = resolver.resolve(str(one)), resolver.resolve(str(two))
    db.commit()
    assert (a.project, a.repo) == ("api", "org1/api")
    assert (b.project, b.repo) == ("api", "org2/api")
    found = lookup_project(db, "api")
    assert (found.status, found.candidates) == ("ambiguous", ["org1/api", "org2/api"])
    exact = lookup_project(db, "org1/api")
    assert (exact.status, exact.key, exact.repo) == ("exact", "api", "org1/api")
    assert lookup_project(db, "org3/api").status == "unknown"


def test_scratch_folder_resolves_by_layout(tmp_path: Path) -> None:
    home = tmp_path / "home"
    task = home / "scratchpad" / "openrig" / "task-42"
    task.mkdir(parents=True)
    wt_task = home / "dev" / "worktrees" / "billing" / "fix-rounding" / "notes"
    wt_task.mkdir(parents=True)
    resolver = IdentityResolver(_settings(tmp_path))
    assert _ident(resolver.resolve(str(task))) == ("openrig", None, None, None, "layout")
    assert _ident(resolver.resolve(str(wt_task))) == ("billing", None, None, None, "layout")
    assert resolver.resolve(str(home / "scratchpad" / "openrig")).source == "unresolved"
    assert resolver.resolve("~/scratchpad/openrig/task-42").project == "openrig"


def test_home_plain_folder_and_empty_path_are_unresolved(tmp_path: Path) -> None:
    home = tmp_path / "home"
    plain = home / "notes" / "misc"
    plain.mkdir(parents=True)
    outside = tmp_path / "scratch" / "random"
    outside.mkdir(parents=True)
    resolver = IdentityResolver(_settings(tmp_path))
    for cwd in (str(home), str(plain), str(outside), "", None, "relative/path", str(tmp_path), "/"):
        hit = resolver.resolve(cwd)
        assert (hit.project, hit.source) == (None, "unresolved"), cwd
    assert resolver.git_calls <= 2 * 3  # the home folder and its ancestors cost no git call


def test_dotfiles_repo_in_home_does_not_claim_plain_folders(tmp_path: Path) -> None:
    home = tmp_path / "home"
    make_repo(home, "git@github.com:me/dotfiles.git")
    plain = home / "notes"
    plain.mkdir()
    resolver = IdentityResolver(_settings(tmp_path))
    assert resolver.resolve(str(plain)).project is None
    assert resolver.resolve(str(home)).project is None


def test_deleted_folder_inside_a_learned_root_still_resolves(tmp_path: Path, database_url: str, db: Session) -> None:
    home = tmp_path / "home"
    repo = make_repo(home / "dev" / "openrig", "https://github.com/acme/openrig.git")
    wt = add_worktree(repo, home / "trees" / "openrig-fix", "fix")
    (repo / "pkg").mkdir()
    settings = _settings(tmp_path, database_url)
    first = IdentityResolver(settings, db)
    assert first.resolve(str(repo / "pkg")).source == "git"
    assert first.resolve(str(wt)).source == "git"
    db.commit()
    learned = {r.path: (r.project, r.repo, r.worktree) for r in db.scalars(select(LearnedRoot))}
    assert learned == {str(repo): ("openrig", "acme/openrig", None), str(wt): ("openrig", "acme/openrig", "openrig-fix")}
    assert db.get(Project, "acme/openrig") is not None
    shutil.rmtree(home / "trees")
    shutil.rmtree(repo)
    later = IdentityResolver(settings, db)
    hit = later.resolve(str(repo / "pkg" / "deep"))
    assert _ident(hit) == ("openrig", "acme/openrig", str(repo), None, "learned")
    hit = later.resolve(str(wt / "src"))
    assert _ident(hit) == ("openrig", "acme/openrig", str(repo), "openrig-fix", "learned")
    assert later.git_calls == 0
    assert later.resolve(str(home / "dev" / "openrig-other")).project is None


def test_learned_roots_prefer_the_deepest(tmp_path: Path, database_url: str, db: Session) -> None:
    home = tmp_path / "home"
    outer = make_repo(home / "dev" / "platform", "git@github.com:acme/platform.git")
    inner = make_repo(outer / "vendor" / "lib", "git@github.com:acme/lib.git")
    settings = _settings(tmp_path, database_url)
    resolver = IdentityResolver(settings, db)
    resolver.resolve(str(outer))
    resolver.resolve(str(inner))
    db.commit()
    shutil.rmtree(outer)
    later = IdentityResolver(settings, db)
    assert later.resolve(str(inner / "src")).project == "lib"
    assert later.resolve(str(outer / "docs")).project == "platform"


def test_catalog_root_wins_over_layout_and_git_wins_over_catalog(tmp_path: Path) -> None:
    home = tmp_path / "home"
    task = home / "scratchpad" / "openrig" / "special-task"
    task.mkdir(parents=True)
    other = home / "scratchpad" / "openrig" / "task-1"
    other.mkdir(parents=True)
    repo = make_repo(home / "srv" / "payments", "git@github.com:acme/payments.git")
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(
        "projects:\n"
        "  - repo: acme/special\n"
        "    roots: ['~/scratchpad/openrig/special-task']\n"
        "  - key: money\n"
        "    roots: ['~/srv']\n"
        "    aliases: [openrig-alias]\n"
    )
    resolver = IdentityResolver(_settings(tmp_path, catalog_path=catalog))
    assert _ident(resolver.resolve(str(task / "sub"))) == ("special", "acme/special", str(task), None, "catalog")
    assert resolver.resolve(str(other)).source == "layout"
    assert _ident(resolver.resolve(str(repo))) == ("payments", "acme/payments", str(repo), None, "git")
    plain = home / "srv" / "static"
    plain.mkdir()
    assert _ident(resolver.resolve(str(plain))) == ("money", None, str(home / "srv"), None, "catalog")


def test_layout_key_named_in_the_catalog_takes_its_repo(tmp_path: Path) -> None:
    home = tmp_path / "home"
    task = home / "scratchpad" / "hooks" / "t1"
    task.mkdir(parents=True)
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text("projects:\n  - repo: the-cloud-clockwork/agentihooks\n    aliases: [hooks]\n")
    hit = IdentityResolver(_settings(tmp_path, catalog_path=catalog)).resolve(str(task))
    assert _ident(hit) == ("agentihooks", "the-cloud-clockwork/agentihooks", None, None, "layout")


def test_an_edited_catalog_is_read_again(tmp_path: Path) -> None:
    task = tmp_path / "home" / "work" / "t1"
    task.mkdir(parents=True)
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text("projects:\n  - repo: acme/first\n    roots: ['~/work']\n")
    settings = _settings(tmp_path, catalog_path=catalog)
    assert IdentityResolver(settings).resolve(str(task)).repo == "acme/first"
    assert IdentityResolver(settings).resolve(str(task)).repo == "acme/first"
    catalog.write_text("projects:\n  - repo: acme/second-one\n    roots: ['~/work']\n")
    assert IdentityResolver(settings).resolve(str(task)).repo == "acme/second-one"


def test_a_broken_catalog_is_a_config_error(tmp_path: Path) -> None:
    from brain_kernel.errors import ConfigError

    bad = tmp_path / "catalog.yaml"
    bad.write_text("projects:\n  - roots: [relative]\n")
    with pytest.raises(ConfigError, match="catalog"):
        IdentityResolver(_settings(tmp_path, catalog_path=bad)).resolve(str(tmp_path))
    (tmp_path / "home" / "x").mkdir()
    settings = _settings(tmp_path, catalog_path=bad)
    proc = brain(settings, "whereis", str(tmp_path / "home" / "x"))
    assert proc.exit_code == 2 and proc.stderr.startswith("error: catalog file"), proc.stderr


def test_submodule_and_nested_repo_resolve_to_the_innermost(tmp_path: Path) -> None:
    home = tmp_path / "home"
    lib_src = make_repo(tmp_path / "upstream" / "lib", "https://github.com/acme/lib.git")
    superproject = make_repo(home / "dev" / "platform", "git@github.com:acme/platform.git")
    resolver = IdentityResolver(_settings(tmp_path))
    (superproject / "docs").mkdir()
    assert resolver.resolve(str(superproject / "docs")).project == "platform"  # warms the cache for the superproject
    sub = add_submodule(superproject, lib_src, "lib")
    git(sub, "remote", "set-url", "origin", "https://github.com/acme/lib.git")
    nested = make_repo(superproject / "experiments" / "probe")
    hit = resolver.resolve(str(sub))
    assert _ident(hit) == ("lib", "acme/lib", str(sub), None, "git")
    assert _ident(resolver.resolve(str(nested))) == ("probe", None, str(nested), None, "git")
    assert resolver.resolve(str(superproject / "experiments")).project == "platform"


def test_git_calls_are_cached_per_folder_and_shared_per_repo(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "home" / "dev" / "api", "git@github.com:org1/api.git")
    folders = [repo / "a" / str(i) for i in range(10)]
    for folder in folders:
        folder.mkdir(parents=True)
    resolver = IdentityResolver(_settings(tmp_path))
    resolver.resolve(str(folders[0]))
    assert resolver.git_calls == 2  # rev-parse + config, once
    for folder in folders:
        assert resolver.resolve(str(folder)).repo == "org1/api"
        resolver.resolve(str(folder))
    assert resolver.git_calls == 2


def test_resolution_order_attrs_session_transcript_then_git(tmp_path: Path, database_url: str, db: Session) -> None:
    repo = make_repo(tmp_path / "home" / "dev" / "api", "git@github.com:org1/api.git")
    resolver = IdentityResolver(_settings(tmp_path, database_url), db)
    stored = ProjectIdentity("web", "org9/web", None, None, str(repo), "attrs")
    record_session(db, "sess-1", stored, agent="claude")
    db.commit()
    url = "https://github.com/org5/tool.git"
    assert resolver.resolve(str(repo), session_id="sess-1", attrs={"repo": "org7/cli"}, transcript_repo_url=url).source == "attrs"
    by_session = resolver.resolve(str(repo), session_id="sess-1", transcript_repo_url=url)
    assert (by_session.project, by_session.source) == ("web", "session")
    by_transcript = resolver.resolve(str(repo), session_id="sess-unknown", transcript_repo_url=url)
    assert (by_transcript.project, by_transcript.repo, by_transcript.source) == ("tool", "org5/tool", "transcript")
    assert resolver.resolve(str(repo), session_id="sess-unknown", transcript_repo_url="/local/path.git").source == "git"
    assert resolver.resolve(None, session_id="sess-1").cwd == str(repo)


def test_whereis_matches_the_resolver_for_every_case(tmp_path: Path) -> None:
    home = tmp_path / "home"
    repo = make_repo(home / "dev" / "openrig", "https://github.com/acme/openrig.git")
    wt = add_worktree(repo, home / "trees" / "openrig-fix", "fix")
    deep = repo / "src" / "core"
    deep.mkdir(parents=True)
    clone = make_repo(home / "dev" / "openrig-clone", "https://github.com/acme/openrig.git")
    api1 = make_repo(home / "dev" / "org1" / "api", "git@github.com:org1/api.git")
    api2 = make_repo(home / "work" / "api", "https://gitlab.com/org2/api")
    task = home / "scratchpad" / "openrig" / "task-7"
    task.mkdir(parents=True)
    plain = home / "notes"
    plain.mkdir()
    special = home / "scratchpad" / "openrig" / "special"
    special.mkdir()
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text("projects:\n  - repo: acme/special\n    roots: ['~/scratchpad/openrig/special']\n")
    settings = _settings(tmp_path, catalog_path=catalog)
    paths = [str(p) for p in (repo, wt, deep, clone, api1, api2, task, plain, home, special)]
    expected = [IdentityResolver(settings).resolve(p).to_dict() for p in paths]
    assert [e["source"] for e in expected] == ["git"] * 6 + ["layout", "unresolved", "unresolved", "catalog"]
    assert _whereis(settings, *paths) == expected


def test_whereis_uses_learned_roots_with_a_database(tmp_path: Path, database_url: str, db: Session) -> None:
    repo = make_repo(tmp_path / "home" / "dev" / "openrig", "https://github.com/acme/openrig.git")
    settings = _settings(tmp_path, database_url)
    first = _whereis(settings, str(repo))
    assert first[0]["source"] == "git"
    shutil.rmtree(repo)
    gone = str(repo / "src")
    second = _whereis(settings, gone)
    assert second == [IdentityResolver(settings, db).resolve(gone).to_dict()]
    assert second[0]["source"] == "learned" and second[0]["project"] == "openrig"


def test_whereis_relative_paths_and_text_output(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "home" / "dev" / "api", "git@github.com:org1/api.git")
    settings = _settings(tmp_path)
    proc = brain(settings, "whereis", ".", "--text", cwd=repo)
    assert proc.exit_code == 0, proc.stderr
    assert proc.stdout.split("\t")[:4] == [str(repo), "api", "org1/api", "git\n"]


def test_whereis_no_learn_records_nothing(tmp_path: Path, database_url: str, db: Session) -> None:
    repo = make_repo(tmp_path / "home" / "dev" / "api", "git@github.com:org1/api.git")
    settings = _settings(tmp_path, database_url)
    assert _whereis(settings, str(repo), extra=("--no-learn",))[0]["source"] == "git"
    assert db.query(LearnedRoot).count() == 0
    _whereis(settings, str(repo))
    assert db.query(LearnedRoot).count() == 1


def test_whereis_on_an_unmigrated_database_is_one_clear_line(tmp_path: Path, pg_admin_url: str) -> None:
    import uuid

    from sqlalchemy.engine import make_url

    from tests.support.harness import admin_exec

    name = f"empty_{uuid.uuid4().hex[:12]}"
    admin_exec(pg_admin_url, f'CREATE DATABASE "{name}"')
    try:
        url = make_url(pg_admin_url).set(database=name).render_as_string(hide_password=False)
        (tmp_path / "home" / "dev").mkdir(parents=True)
        settings = _settings(tmp_path, url)
        proc = brain(settings, "whereis", str(tmp_path / "home" / "dev"))
        assert proc.exit_code == 2
        assert proc.stderr.strip() == "error: the database has no index schema yet: run `brain migrate`"
    finally:
        admin_exec(pg_admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_deleted_folder_resolves_to_the_repo_of_its_nearest_existing_ancestor(tmp_path: Path) -> None:
    home = tmp_path / "home"
    repo = make_repo(home / "dev" / "agentihub", "git@github.com:acme/agentihub.git")
    wt = add_worktree(repo, home / "trees" / "agentihub-fix", "fix")
    resolver = IdentityResolver(_settings(tmp_path))
    gone = repo / "packages" / "deleted" / "deeper"
    assert _ident(resolver.resolve(str(gone))) == ("agentihub", "acme/agentihub", str(repo), None, "git")
    assert resolver.resolve(str(gone)).cwd == str(gone)
    assert _ident(resolver.resolve(str(wt / "gone"))) == ("agentihub", "acme/agentihub", str(repo), "agentihub-fix", "git")
    (home / "notes").mkdir()
    for cwd in (home / "notes" / "gone", home / "gone" / "deeper", tmp_path / "elsewhere" / "gone"):
        assert resolver.resolve(str(cwd)).source == "unresolved", cwd


def test_a_git_boundary_between_a_deleted_folder_and_the_repo_stops_the_ancestor_rule(tmp_path: Path) -> None:
    home = tmp_path / "home"
    repo = make_repo(home / "dev" / "platform", "git@github.com:acme/platform.git")
    broken = repo / "vendor" / "lib"
    (broken / ".git").mkdir(parents=True)  # a .git folder git skips: the deleted folder may have been another repository
    resolver = IdentityResolver(_settings(tmp_path))
    assert resolver.resolve(str(broken / "src" / "gone")).source == "unresolved"
    assert resolver.resolve(str(repo / "vendor" / "gone")).project == "platform"
    dotfiles = make_repo(home, "git@github.com:me/dotfiles.git")
    assert resolver.resolve(str(dotfiles / "gone" / "x")).source == "unresolved"


def test_a_deleted_nested_repo_known_by_its_learned_root_is_not_given_to_the_outer_repo(tmp_path: Path, database_url: str, db: Session) -> None:
    home = tmp_path / "home"
    outer = make_repo(home / "dev" / "platform", "git@github.com:acme/platform.git")
    inner = make_repo(outer / "vendor" / "lib", "git@github.com:acme/lib.git")
    settings = _settings(tmp_path, database_url)
    IdentityResolver(settings, db).resolve(str(inner))
    db.commit()
    shutil.rmtree(inner)
    later = IdentityResolver(settings, db)
    assert _ident(later.resolve(str(inner / "src"))) == ("lib", "acme/lib", str(inner), None, "learned")
    assert _ident(later.resolve(str(outer / "docs" / "gone"))) == ("platform", "acme/platform", str(outer), None, "git")
