"""The one frontmatter codec: real YAML, quoting that cannot break, targeted edits."""

from __future__ import annotations

import pytest
import yaml

from brain_core.vault import frontmatter


def test_hostile_titles_round_trip() -> None:
    titles = ["a: b", "line one\nline two", "---", "- item", "#hash", "'quoted' \"both\"", "yes", "null", "12", "[x]", "{y}", "tab\there", "ünïcödé"]
    for title in titles:
        text = frontmatter.render({"title": title, "project": "api"}, "body\n")
        doc = frontmatter.parse(text)
        assert doc.meta == {"title": title, "project": "api"}, title
        assert doc.body == "body\n"
        block = text.split("---\n")[1]
        assert yaml.safe_load(block)["title"] == title


def test_old_flat_frontmatter_that_yaml_rejects_still_reads() -> None:
    text = "---\ntitle: Fix: the thing: again\nstatus: active\nheat: 3.5\n---\nbody"
    doc = frontmatter.parse(text)
    assert doc.meta["status"] == "active"
    assert doc.meta["heat"] == 3.5
    assert doc.meta["title"] == "Fix: the thing: again"


def test_file_without_frontmatter_is_all_body() -> None:
    doc = frontmatter.parse("# Just markdown\n")
    assert doc.meta == {} and not doc.has_frontmatter and doc.body == "# Just markdown\n"


def test_update_touches_only_the_edited_keys() -> None:
    original = (
        "---\n"
        "cluster_id: c-1\n"
        "title:   'Odd   spacing kept'\n"
        "source_sessions:\n"
        "  - s1\n"
        "  - s2\n"
        "heat: 1.0\n"
        "# a comment the operator wrote\n"
        "status: active\n"
        "---\n"
        "Body stays.\n"
    )
    updated = frontmatter.update(original, {"heat": 7.25, "project": "api"})
    assert updated == original.replace("heat: 1.0\n", "heat: 7.25\n").replace("---\nBody", "project: api\n---\nBody")
    assert frontmatter.parse(updated).meta["source_sessions"] == ["s1", "s2"]


def test_update_replaces_multiline_values_and_removes_keys() -> None:
    original = "---\na: 1\nlist:\n  - x\n  - y\nb: 2\n---\n"
    updated = frontmatter.update(original, {"list": ["z"]}, remove=("b",))
    assert frontmatter.parse(updated).meta == {"a": 1, "list": ["z"]}
    assert updated.startswith("---\na: 1\n")


def test_update_adds_frontmatter_to_a_plain_file() -> None:
    assert frontmatter.update("text\n", {"k": "v"}) == "---\nk: v\n---\ntext\n"


def test_dates_read_back_as_iso_strings() -> None:
    doc = frontmatter.parse("---\ncreated: 2026-11-28T10:00:00Z\nday: 2026-11-28\n---\n")
    assert doc.meta["day"] == "2026-11-28"
    assert doc.meta["created"].startswith("2026-11-28T10:00:00")


def test_old_flat_value_with_a_colon_stays_one_string() -> None:
    doc = frontmatter.parse("---\ntitle: Disk: full again\nseverity: critical\n---\nbody\n")
    assert doc.meta == {"title": "Disk: full again", "severity": "critical"}


def test_update_replaces_a_value_holding_blank_lines_whole() -> None:
    text = frontmatter.render({"title": "x", "summary": "para one\n\npara two", "heat": 1}, "body\n")
    updated = frontmatter.update(text, {"summary": "new"})
    assert frontmatter.parse(updated).meta == {"title": "x", "summary": "new", "heat": 1}
    block = "---\ntitle: x\nnotes: |\n  a\n\n  b\n\n# kept\nheat: 2\n---\nbody\n"
    assert frontmatter.update(block, {"notes": "z"}) == "---\ntitle: x\nnotes: z\n\n# kept\nheat: 2\n---\nbody\n"
    assert frontmatter.update(block, {"heat": 3}) == block.replace("heat: 2", "heat: 3")


CORPUS = [
    "---\ncluster_id: 2026-11-29-fix-0123456789ab\ntitle: Fix: the login | redirect\nregion: left-hemisphere\nstatus: active\nheat: 7\n"
    "source_sessions: [a, b]\nproject: web\ncreated: 2026-11-29T08:00:00+00:00\nsignals: {errors: 2, joy: 1, tools: 2400}\nedges: []\nsynthesized: false\n---\nbody\n",
    '---\ntitle: "quoted \\u00e9 title"\ncreated: 2026-11-20\ntags:\n  - idea\n  - search\n---\n# x\n',
    "---\ntitle: Disk: full: again\nnot yaml: [unclosed\nseverity: warning\n---\nbody\n",
    "---\n# a comment\nempty:\nlist_literal: []\nnumber: 0.50\nflag: yes\nnull_value: ~\n---\n",
    "---\nsummary: |\n  line one\n\n  line three\ntitle: Multi\n---\n",
    "---\n---\nno meta\n",
    "no frontmatter at all\n",
]


@pytest.mark.parametrize("text", CORPUS)
def test_libyaml_and_the_pure_loader_read_every_file_alike(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fm = frontmatter
    assert fm._Loader is getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    fast = fm.parse(text)
    monkeypatch.setattr(fm, "_Loader", yaml.SafeLoader)
    assert fm.parse(text) == fast


VALUES = ["api", "acme/service-01", "agentihooks-fix", "a.b", "_x", "x/", "On", "yEs", "y", "NULL", "e5", "inf", "a b", "a:b", "a#b", "1a", "-a", ".a", "ü", ""]


def test_values_written_without_the_emitter_are_byte_for_byte_the_emitters() -> None:
    fast = 0
    for value in [*VALUES, None, "a" * 200]:
        for given in (value, [value], [value, "web"], []):
            assert frontmatter.dump_value("project", given) == frontmatter._yaml_dump("project", given), given
            fast += frontmatter._fast_dump("project", given) is not None
    assert fast > 20  # the plain strings, None and their lists took the short way


EDITS = [
    *CORPUS,
    "---\r\ntitle: 'a: b'\r\nproject: src\r\n---\r\nbody\r\n",
    "---\nproject: a\nheat: 1\nproject: b\n---\n",  # a key twice: YAML keeps the last, the edit rewrites the first
    '---\ntitle: "two\nproject: lines"\n---\n',  # a line that looks like a key inside a quoted value
    "---\nprojects:\n- x\n- y\nrepo: null\n---\nbody\n",
]


@pytest.mark.parametrize("text", EDITS)
def test_an_edits_document_is_what_parsing_the_edited_file_gives(text: str) -> None:
    for changes, remove in (
        ({"project": "api", "projects": ["api", "web"], "repo": None, "worktrees": []}, ()),
        ({"project": "yes", "title": "a: b"}, ("heat",)),
        ({}, ("project", "projects")),
    ):
        edited, doc = frontmatter.edit(text, frontmatter.parse(text), changes, remove)
        assert edited == frontmatter.update(text, changes, remove)
        assert doc == frontmatter.parse(edited), (changes, remove)


def test_a_value_nested_deeper_than_the_parsers_walk_is_a_bad_block_not_a_stop() -> None:
    """600 levels of ``tags:`` (1.2 kB, from a peer's sync or a hand edit) stopped every tick and reindex."""
    deep = "---\ntitle: Deep\ncluster_id: arc-deep\ntags: " + "[" * 600 + "]" * 600 + "\n---\nbody\n"
    doc = frontmatter.parse(deep)
    assert doc.meta["title"] == "Deep" and doc.meta["cluster_id"] == "arc-deep" and not doc.strict and doc.body == "body\n"
    nested_map = "---\ntitle: Deep\nmeta:\n" + "".join("  " * n + f"k{n}:\n" for n in range(1, 1200)) + "---\nbody\n"
    assert frontmatter.parse(nested_map).meta["title"] == "Deep"
