"""The pure identity rules: remote normalisation, canonical key, catalog, layout, attrs, git facts."""

from __future__ import annotations

import pytest

from brain_core import identity as core
from brain_core.identity import CatalogError, GitFacts, LearnedRoot, ProjectIdentity, normalise_worktree
from brain_core.keys import InvalidKey

HOME = "/home/dev"


@pytest.mark.parametrize(
    ("url", "slug"),
    [
        ("git@github.com:the-cloud-clockwork/agentihooks.git", "the-cloud-clockwork/agentihooks"),
        ("git@github.com:the-cloud-clockwork/agentihooks", "the-cloud-clockwork/agentihooks"),
        ("https://github.com/the-cloud-clockwork/agentihooks.git", "the-cloud-clockwork/agentihooks"),
        ("https://github.com/the-cloud-clockwork/agentihooks", "the-cloud-clockwork/agentihooks"),
        ("https://github.com/the-cloud-clockwork/agentihooks/", "the-cloud-clockwork/agentihooks"),
        ("https://github.com/the-cloud-clockwork/agentihooks.git/", "the-cloud-clockwork/agentihooks"),
        ("ssh://git@github.com:2222/Acme/OpenRig.git", "acme/openrig"),
        ("ssh://git@gitlab.example.com/group/sub/deeper/api.git", "group/sub/deeper/api"),
        ("https://gitlab.com/group/subgroup/api.git", "group/subgroup/api"),
        ("HTTPS://GITHUB.COM/Acme/OpenRig.git", "acme/openrig"),
        ("https://user:s3cret@github.com/acme/openrig.git", "acme/openrig"),
        ("https://github.com:443/acme/openrig", "acme/openrig"),
        ("git://github.com/acme/openrig.git", "acme/openrig"),
        ("git+ssh://git@github.com/acme/openrig.git", "acme/openrig"),
        ("github.com:acme/openrig.git", "acme/openrig"),
        ("org-123@github.com:Acme/openrig.git", "acme/openrig"),
        ("  git@github.com:acme/openrig.git\n", "acme/openrig"),
        ("https://github.com/acme/openrig.git?ref=main#readme", "acme/openrig"),
        ("ssh://git@host.example:7999/~alice/dotfiles.git", "alice/dotfiles"),
        ("https://dev.azure.com/acme/platform/_git/api", "acme/platform/api"),
        ("git@ssh.dev.azure.com:v3/acme/platform/api", "acme/platform/api"),
        ("https://bitbucket.org/acme/my.repo.git", "acme/my.repo"),
    ],
)
def test_remote_forms_normalise_to_one_slug(url: str, slug: str) -> None:
    assert core.normalise_remote(url) == slug


@pytest.mark.parametrize(
    "url",
    [
        "",
        "   ",
        None,
        "/srv/git/acme/openrig.git",
        "../openrig.git",
        "./openrig",
        "~/repos/openrig.git",
        "file:///srv/git/acme/openrig.git",
        "C:\\repos\\openrig.git",
        "https://github.com/openrig.git",
        "https://github.com/",
        "git@github.com:openrig.git",
        "https://github.com/acme/../etc",
        "not a url",
    ],
)
def test_local_paths_and_malformed_remotes_give_no_slug(url: str | None) -> None:
    assert core.normalise_remote(url) is None


def test_canonical_key_is_the_slug_tail_else_the_root_basename() -> None:
    assert core.canonical_key("the-cloud-clockwork/agentihooks", "/srv/anything") == "agentihooks"
    assert core.canonical_key(None, "/home/dev/OpenRig") == "openrig"
    assert core.canonical_key(None, "/srv/git/api.git") == "api"
    assert core.canonical_key(None, "/home/dev/My Project!") == "my-project"
    assert core.canonical_key(None, None) is None


def test_identity_without_project_must_be_unresolved() -> None:
    with pytest.raises(ValueError):
        ProjectIdentity(None, None, None, None, "/x", "git")
    with pytest.raises(ValueError):
        ProjectIdentity("a", None, None, None, "/x", "basename")
    assert core.unresolved("/x").to_dict() == {
        "cwd": "/x",
        "project": None,
        "repo": None,
        "root": None,
        "worktree": None,
        "source": "unresolved",
    }


def test_git_facts_main_checkout_worktree_submodule_and_bare() -> None:
    main = GitFacts("/r/api/.git", "/r/api/.git", "/r/api", "git@github.com:org1/api.git")
    assert (main.main_root, main.worktree_name) == ("/r/api", None)
    linked = GitFacts("/r/api/.git/worktrees/api-fix", "/r/api/.git", "/wt/api-fix")
    assert (linked.main_root, linked.worktree_name) == ("/r/api", "api-fix")
    sub = GitFacts("/r/super/.git/modules/lib", "/r/super/.git/modules/lib", "/r/super/lib")
    assert (sub.main_root, sub.worktree_name) == ("/r/super/lib", None)
    bare_wt = GitFacts("/srv/api.git/worktrees/feature", "/srv/api.git", "/wt/feature")
    assert core.from_git(bare_wt, "/wt/feature", HOME).project == "api"  # type: ignore[union-attr]


def test_git_repo_at_home_or_above_is_not_a_project() -> None:
    dotfiles = GitFacts(f"{HOME}/.git", f"{HOME}/.git", HOME, "git@github.com:me/dotfiles.git")
    assert core.from_git(dotfiles, f"{HOME}/notes", HOME) is None
    root_repo = GitFacts("/.git", "/.git", "/")
    assert core.from_git(root_repo, "/etc", HOME) is None


def test_worktree_learns_both_its_path_and_the_main_root() -> None:
    facts = GitFacts("/r/api/.git/worktrees/fix", "/r/api/.git", "/wt/fix", "https://github.com/org1/api")
    ident = core.from_git(facts, "/wt/fix/src", HOME)
    assert ident is not None
    assert core.learned_paths(ident, facts.toplevel) == [("/r/api", None), ("/wt/fix", "fix")]


def test_layout_patterns_capture_the_project_folder() -> None:
    patterns = ["~/scratchpad/{project}/*", "~/dev/worktrees/{project}/*"]
    assert core.from_layout(f"{HOME}/scratchpad/openrig/task-1", patterns, "c", HOME).project == "openrig"  # type: ignore[union-attr]
    assert core.from_layout(f"{HOME}/scratchpad/openrig/task-1/a/b", patterns, "c", HOME).project == "openrig"  # type: ignore[union-attr]
    assert core.from_layout(f"{HOME}/dev/worktrees/API/fix", patterns, "c", HOME).project == "api"  # type: ignore[union-attr]
    assert core.from_layout(f"{HOME}/scratchpad/openrig", patterns, "c", HOME) is None
    assert core.from_layout(f"{HOME}/scratchpadx/openrig/t", patterns, "c", HOME) is None
    assert core.from_layout("/elsewhere/scratchpad/openrig/t", patterns, "c", HOME) is None
    assert core.from_layout(f"{HOME}/x/work-api-2/t", ["~/x/work-{project}-*/*"], "c", HOME).project == "api"  # type: ignore[union-attr]
    assert core.compile_layout("~/no-placeholder/*", HOME) is None


def test_catalog_deepest_root_wins_and_tilde_is_home() -> None:
    catalog = core.parse_catalog(
        {
            "projects": [
                {"repo": "acme/platform", "roots": ["~/dev/platform"]},
                {"key": "billing", "roots": ["~/dev/platform/services/billing"], "aliases": ["bill"]},
            ]
        },
        HOME,
    )
    hit = core.from_catalog(f"{HOME}/dev/platform/services/billing/src", catalog, "c", HOME)
    assert (hit.project, hit.root, hit.source) == ("billing", f"{HOME}/dev/platform/services/billing", "catalog")  # type: ignore[union-attr]
    hit = core.from_catalog(f"{HOME}/dev/platform/docs", catalog, "c", HOME)
    assert (hit.project, hit.repo) == ("platform", "acme/platform")  # type: ignore[union-attr]
    assert core.from_catalog(f"{HOME}/dev/platformer", catalog, "c", HOME) is None
    assert core.catalog_project_for_key("bill", catalog).key == "billing"  # type: ignore[union-attr]


def test_catalog_mapping_form_and_its_errors() -> None:
    catalog = core.parse_catalog({"projects": {"api": {"repo": "org1/api", "roots": "/srv/api"}}})
    assert catalog[0].key == "api" and catalog[0].roots == ("/srv/api",)
    with pytest.raises(CatalogError, match="absolute"):
        core.parse_catalog({"projects": [{"key": "x", "roots": ["relative/path"]}]})
    with pytest.raises(CatalogError, match="key or a repo"):
        core.parse_catalog({"projects": [{"roots": ["/x"]}]})
    with pytest.raises(CatalogError):
        core.parse_catalog(["not", "a", "mapping"])


def test_learned_roots_deepest_match_wins() -> None:
    learned = [
        LearnedRoot("/r/super", "super", "o/super", "/r/super"),
        LearnedRoot("/r/super/vendor/lib", "lib", "o/lib", "/r/super/vendor/lib"),
        LearnedRoot("/wt/fix", "super", "o/super", "/r/super", "fix"),
    ]
    assert core.from_learned("/r/super/vendor/lib/src", learned, "c").project == "lib"  # type: ignore[union-attr]
    assert core.from_learned("/r/super/docs", learned, "c").project == "super"  # type: ignore[union-attr]
    assert core.from_learned("/wt/fix/a", learned, "c").worktree == "fix"  # type: ignore[union-attr]
    assert core.from_learned("/r/superb", learned, "c") is None


def test_attrs_are_validated_and_must_agree() -> None:
    hit = core.from_attrs({"repo": "git@github.com:Org1/API.git", "worktree": "api-fix"}, "/x")
    assert (hit.project, hit.repo, hit.worktree, hit.source) == ("api", "org1/api", "api-fix", "attrs")  # type: ignore[union-attr]
    assert core.from_attrs({"project": "Org1/Api"}, None).repo == "org1/api"  # type: ignore[union-attr]
    assert core.from_attrs({"project": "API"}, None).repo is None  # type: ignore[union-attr]
    assert core.from_attrs({"project": "", "repo": None}, None) is None
    for bad in ({"project": "../etc"}, {"project": "a b"}, {"repo": "justname"}, {"project": "web", "repo": "org1/api"}, {"project": "x", "worktree": "a/b"}):
        with pytest.raises(InvalidKey):
            core.from_attrs(bad, None)


@pytest.mark.parametrize("name", ["wt-fix-ünï", "-hidden-wt", "feature_2", "release.1"])
def test_every_worktree_name_git_gives_is_one(name: str) -> None:
    """git names a linked worktree after its folder, made a ref component: spaces become '-', a leading '.' too."""
    assert normalise_worktree(name) == name


@pytest.mark.parametrize("name", ["a/b", "..", ".", "x\x00y", "a\\b", "x" * 201])
def test_a_worktree_that_is_not_one_folder_name_is_refused(name: str) -> None:
    with pytest.raises(InvalidKey):
        normalise_worktree(name)


@pytest.mark.parametrize(("root", "key"), [("/src/api/.bare", "api"), ("/src/web/.git", "web"), ("/src/cli.git", "cli"), ("/src/bare", "bare")])
def test_a_bare_repository_of_a_worktrees_layout_is_named_by_its_folder(root: str, key: str) -> None:
    """``git clone --bare URL p/.bare`` with ``p/main``, ``p/feat`` worktrees: every such repository was ``bare``."""
    assert core.key_of_root(root) == key
