"""Marker formats (pure): validation, rendering, and parsing back, old files included."""

from __future__ import annotations

import datetime as dt

import pytest
import yaml

from brain_core.markers import Attribution, MarkerInvalid, body_hash, parse_request
from brain_core.text import slugify
from brain_core.vault import frontmatter
from brain_core.vault.layout import adr_number, decision_path, lesson_path, milestone_path, signal_path
from brain_core.vault.logs import MarkerKey, render_decision, render_log_entry, render_signal, retag_entry
from brain_core.vault.records import decision_record, lesson_records, log_entries, milestone_records, signal_record

AT = dt.datetime(2026, 11, 28, 14, 3, 22, tzinfo=dt.timezone.utc)
API = Attribution("api", "org1/api", None, "attrs")


def req(type_: str = "lesson", content: str = "Body text.", **attrs: str):
    return parse_request(type_, content, attrs, max_chars=4096)


def test_old_lesson_headers_without_a_project_parse_as_unattributed() -> None:
    old = (
        "# Lessons 2026-11-27\n\n"
        "## 14:03 — from claude-code\n\nFirst old lesson.\n\n"
        "## 14:03 — from claude-code\n\nSame header, other lesson.\n\n"
        "## 2026-11-27 09:15:00 lesson\nno blank line before content\n"
        "## A header with no time at all\n\nStill a lesson.\n"
    )
    records = lesson_records(old, "left/reference/lessons-2026-11-27.md")
    assert [r.content for r in records] == ["First old lesson.", "Same header, other lesson.", "no blank line before content", "Still a lesson."]
    assert all(r.project is None and r.repo is None and r.projects == () for r in records)
    assert len({r.id for r in records}) == 4
    assert records[0].title == "First old lesson." and records[0].meta["source"] == "from claude-code"  # upstream's "— <source>"
    assert records[0].occurred_at == dt.datetime(2026, 11, 27, 14, 3, tzinfo=dt.timezone.utc)
    assert records[2].occurred_at == dt.datetime(2026, 11, 27, 9, 15, tzinfo=dt.timezone.utc)
    assert records[3].occurred_at is None and records[3].title == "A header with no time at all"
    # ids are stable: parsing again (or after more appends) gives the same ids
    more = old + render_log_entry("lesson", req(), API, marker_id="m1", at=AT)
    assert [r.id for r in lesson_records(more, "left/reference/lessons-2026-11-27.md")[:4]] == [r.id for r in records]


def test_upstream_lesson_headers_give_their_source_and_session() -> None:
    old = "## 2026-04-10T12:00:00+00:00 — claude-code — `3f2a9c1e`\n\nPin the resolver.\n\n## 2026-04-10T12:05:00+00:00 — unknown\n\nNo session.\n"
    first, second = lesson_records(old, "left/reference/lessons-2026-04-10.md")
    assert (first.title, first.content, first.meta) == ("Pin the resolver.", "Pin the resolver.", {"source": "claude-code", "session_id": "3f2a9c1e"})
    assert second.meta == {} and first.project is None


def test_new_headers_keep_upstreams_source_and_session_after_the_title() -> None:
    text = render_log_entry("lesson", req(content="Cache it.", source="claude-code", session_id="s-9"), API, marker_id="m1", at=AT)
    header = text.splitlines()[0]
    assert header.endswith("] Cache it. — claude-code — `s-9`"), header
    [record] = lesson_records(text, "left/reference/lessons-2026-11-29.md")
    assert record.title == "Cache it." and record.meta["session_id"] == "s-9"
    milestone = render_log_entry("milestone", req("milestone", "Shipped.", scope="kb-router"), API, marker_id="m2", at=AT)
    assert milestone.splitlines()[0].endswith("] Shipped. — unknown — scope=kb-router — status=done")
    [m] = milestone_records(milestone, "left/projects/api/BLOCKS.md")
    assert (m.title, m.meta["scope"], m.meta["status"]) == ("Shipped.", "kb-router", "done")


def test_a_rendered_entry_parses_the_same_alone_and_inside_its_file() -> None:
    path = lesson_path(AT)
    entry = render_log_entry("lesson", req(session_id="s1", source="codex"), API, marker_id="abc", at=AT)
    file_text = "# Lessons 2026-11-28\n\n## 09:00 old\n\nold\n\n" + entry + render_log_entry("lesson", req(), API, marker_id="def", at=AT)
    [alone] = lesson_records(entry, path)
    assert lesson_records(file_text, path)[1] == alone
    assert (alone.project, alone.repo, alone.occurred_at) == ("api", "org1/api", AT)
    assert alone.meta == {"marker_id": "abc", "session_id": "s1", "source": "codex", "project_source": "attrs"}


def test_a_title_cannot_pose_as_a_project_tag() -> None:
    entry = render_log_entry("lesson", req(title="[project: evil] pwned"), Attribution(), marker_id="x", at=AT)
    [record] = lesson_records(entry, lesson_path(AT))
    assert record.project is None and record.title == "[project: evil] pwned"


def test_hostile_attr_values_stay_inside_the_meta_comment() -> None:
    entry = render_log_entry("lesson", req(source="x --> ## 12:00 [project: evil]", title="a\nb"), API, marker_id="x", at=AT)
    assert entry.count("\n## ") == 0 and entry.startswith("## ")
    [record] = lesson_records(entry, lesson_path(AT))
    assert record.meta["source"] == "x --> ## 12:00 [project: evil]" and record.title == "a b" and record.project == "api"


def test_header_escaping_round_trips() -> None:
    content = "## looks like a header\n\\## one backslash\n\\\\## two\n### level three is fine"
    [record] = lesson_records(render_log_entry("lesson", req(content=content), API, marker_id="x", at=AT), lesson_path(AT))
    assert record.content == content


def test_milestones_in_blocks_take_the_project_from_the_path_or_the_entry() -> None:
    path = milestone_path("api", AT)
    assert path == "left/projects/api/BLOCKS.md"
    text = "# api: milestones\n\n## 2026-11-01 old untagged block\n\nold\n\n" + render_log_entry(
        "milestone", req("milestone"), Attribution("api", "org2/api"), marker_id="x", at=AT
    )
    old, new = milestone_records(text, path)
    assert (old.project, old.repo, old.kind) == ("api", None, "milestone")
    assert (new.project, new.repo) == ("api", "org2/api")


def test_daily_notes_yield_only_milestones() -> None:
    path = milestone_path(None, AT)
    assert path == "daily/2026-11-28.md"
    text = "# 2026-11-28\n\n## Notes\n\nnot a milestone\n\n## 10:00 Milestone: shipped\n\nold milestone\n\n" + render_log_entry(
        "milestone", req("milestone"), Attribution(), marker_id="x", at=AT
    )
    records = milestone_records(text, path)
    assert [r.content for r in records] == ["old milestone", "Body text."]
    assert all(r.project is None for r in records)


UPSTREAM_MILESTONES = (  # as upstream's POST /marker appended them (UPSTREAM.md 1.6), with a person's checklist around
    "# 2026-11-20\n\n- [ ] buy milk\n- [x] call the bank\n"
    "- [x] 2026-11-20T10:00:00+00:00 — claude-code — status=done\n  Shipped the config loader\n"
    "- [x] 2026-11-20T11:30:00+00:00 — unknown — scope=auth — status=blocked\n  The login flow waits on the IdP.\n"
)


def test_upstreams_checkbox_milestones_read_in_daily_notes_and_blocks() -> None:
    daily = milestone_records(UPSTREAM_MILESTONES, "daily/2026-11-20.md")
    assert [(r.content, r.meta.get("source"), r.meta.get("status"), r.meta.get("scope")) for r in daily] == [
        ("Shipped the config loader", "claude-code", "done", None),
        ("The login flow waits on the IdP.", None, "blocked", "auth"),
    ]
    assert daily[0].occurred_at == dt.datetime(2026, 11, 20, 10, 0, tzinfo=dt.timezone.utc) and daily[0].project is None
    blocks = milestone_records(UPSTREAM_MILESTONES, "left/projects/api/BLOCKS.md")
    assert [(r.project, r.content) for r in blocks] == [("api", "Shipped the config loader"), ("api", "The login flow waits on the IdP.")]
    # A lesson log never reads a checklist line as an entry, nor does an entry's content.
    lesson = render_log_entry("lesson", req("lesson", content="Steps:\n- [x] 2026-11-20T10:00:00+00:00 — x — status=done"), API, marker_id="x", at=AT)
    assert len(lesson_records(lesson, lesson_path(AT))) == 1


def test_a_checkbox_milestone_the_backfill_tags_keeps_its_id_and_reads_its_project() -> None:
    [(record, entry)] = log_entries("milestone", UPSTREAM_MILESTONES.split("- [x] 2026-11-20T11")[0], "daily/2026-11-20.md")
    tagged = retag_entry(UPSTREAM_MILESTONES, entry, Attribution("api", "org1/api", source="backfill"))
    assert "- [x] 2026-11-20T10:00:00+00:00 [project: api repo: org1/api] — claude-code — status=done\n" in tagged
    again = milestone_records(tagged, "daily/2026-11-20.md")
    assert (again[0].id, again[0].project, again[0].repo, again[0].meta.get("source")) == (record.id, "api", "org1/api", "claude-code")
    assert again[1].project is None


@pytest.mark.parametrize("title", ["a: b", "line one\nline two", "---", "x\n---\ny: z", "- item", "#hash", "'q' \"qq\"", "null", "[x]", "tab\there"])
def test_hostile_titles_cannot_break_signal_or_decision_frontmatter(title: str) -> None:
    r = req("signal", title=title, severity="high")
    signal = render_signal(r, API, marker_id="x", at=AT)
    assert yaml.safe_load(signal.split("\n---\n")[0].removeprefix("---\n"))["title"] == title
    record = signal_record(signal, signal_path(title, "high", AT))
    assert (record.title, record.project, record.severity, record.content) == (title, "api", "high", "Body text.")
    decision = render_decision(req("decision", title=title), API, number=3, marker_id="x", at=AT)
    record = decision_record(decision, decision_path(3, title))
    assert (record.title, record.project, record.status, record.meta["adr"]) == (title, "api", "proposed", 3)  # upstream's default
    assert frontmatter.parse(decision).meta["repo"] == "org1/api"


def test_a_signal_file_of_severity_resolved_is_no_current_alarm() -> None:
    tomb = "---\ntitle: Queue\nseverity: resolved\n---\n(CLEARED: drained) queue depth\n"
    assert signal_record(tomb, "amygdala/20261101-080000-resolved-queue.md").status == "resolved"  # out of feeds and blocks
    retracted = tomb.replace("severity: resolved", "severity: resolved\nstatus: retracted")
    assert signal_record(retracted, "amygdala/20261101-080000-resolved-queue.md").status == "retracted"  # curation first
    assert signal_record(tomb.replace("resolved", "critical", 1), "amygdala/x.md").status is None


def test_old_signal_and_decision_files_still_parse() -> None:
    old_signal = "---\ntitle: Disk: full again\nseverity: critical\n---\nThe disk is full.\n"
    record = signal_record(old_signal, "amygdala/20261101-080000-critical-disk-full.md")
    assert (record.project, record.scope, record.severity, record.title) == (None, "project", "critical", "Disk: full again")
    assert record.occurred_at == dt.datetime(2026, 11, 1, 8, 0, tzinfo=dt.timezone.utc)
    no_frontmatter = "# ADR-0007: Use Postgres\n\nBecause.\n"
    record = decision_record(no_frontmatter, "left/decisions/ADR-0007-use-postgres.md")
    assert (record.title, record.content, record.project, record.meta["adr"]) == ("Use Postgres", "Because.", None, 7)


def test_invalid_project_in_an_old_file_is_dropped_not_trusted() -> None:
    record = signal_record("---\nproject: ../../etc\n---\nx\n", "amygdala/x.md")
    assert record.project is None


def test_fleet_signals_are_fleet_scoped() -> None:
    signal = render_signal(req("signal", scope="fleet"), API, marker_id="x", at=AT)
    assert signal_record(signal, "amygdala/x.md").scope == "fleet"


def test_request_defaults_and_normalisation() -> None:
    r = req("  Lesson ", "\r\nfirst line\r\nsecond\r\n", project="Org1/API", worktree="feature-x", session_id=" s1 ")
    assert (r.type, r.content, r.title) == ("lesson", "first line\nsecond", "first line")
    assert (r.identity.project, r.identity.repo, r.worktree, r.session_id) == ("api", "org1/api", "feature-x", "s1")
    assert r.scope == "project" and r.severity is None
    assert req(project="").identity is None


def test_body_hash_ignores_key_order_but_not_values() -> None:
    assert body_hash("lesson", "x", {"a": "1", "b": "2"}) == body_hash("lesson", "x", {"b": "2", "a": "1"})
    assert body_hash("lesson", "x", {}) == body_hash("lesson", "x", None)
    assert body_hash("lesson", "x", {}) != body_hash("lesson", "y", {})


@pytest.mark.parametrize(
    "type_,content,attrs",
    [
        ("note", "x", {}),
        ("lesson", "", {}),
        ("lesson", "x" * 4097, {}),
        ("lesson", "x", ["a"]),
        ("lesson", "x", "project=api"),
        ("lesson", "   ", {}),
    ],
)
def test_bad_requests_raise_marker_invalid(type_, content, attrs) -> None:
    with pytest.raises(MarkerInvalid):
        parse_request(type_, content, attrs, max_chars=4096)


@pytest.mark.parametrize(
    "attrs",
    [
        [],
        None,
        {"a": 1, "nested": {"x": [1, 2]}},
        {"project": "a/../b"},
        {"repo": "/abs/path"},
        {"project": "web", "repo": "org/api"},
        {"severity": "very bad!", "status": "maybe / later", "scope": "phase-7"},
        {"session_id": "s\x00", "title": {"a": 1}},
    ],
)
def test_any_attrs_are_accepted_and_unusable_ones_ignored(attrs) -> None:
    r = parse_request("milestone", "x", attrs, max_chars=4096)
    assert r.type == "milestone" and r.content == "x"
    assert r.identity is None or r.identity.project in ("api",)  # a contradiction keeps the repo, never a guess


def test_a_project_that_is_a_path_is_a_working_folder() -> None:
    r = req(project="/home/op/dev/api")
    assert r.identity is None and r.cwd == "/home/op/dev/api"
    assert req("milestone", scope="kb-router").label == "kb-router" and req("milestone", scope="kb-router").scope == "project"
    assert req("signal", scope="fleet").scope == "fleet" and req("signal", fleet="true").scope == "fleet"
    assert req("milestone", scope="fleet").scope == "project"  # only a signal is ever fleet-wide


def test_slugs_and_adr_numbers() -> None:
    assert slugify("Use ../../etc: ünïcödé & Co!") == "use-etc-unicode-co"
    assert slugify("!!!") == "untitled"
    assert len(slugify("word " * 50)) <= 60
    assert adr_number("left/decisions/ADR-0042-x.md") == 42 and adr_number("README.md") is None
    assert decision_path(5, "A/B") == "left/decisions/ADR-0005-a-b.md"


def test_old_time_only_headers_keep_their_time_of_day() -> None:
    old = "# Lessons 2026-11-27\n\n## 9:05 — from claude-code\n\nEarly lesson.\n\n## 14:03 — from claude-code\n\nLater lesson.\n"
    times = [r.occurred_at for r in lesson_records(old, "left/reference/lessons-2026-11-27.md")]
    assert times == [dt.datetime(2026, 11, 27, 9, 5, tzinfo=dt.timezone.utc), dt.datetime(2026, 11, 27, 14, 3, tzinfo=dt.timezone.utc)]


@pytest.mark.parametrize("stored, namespace, shown", [("k-1", None, "k-1"), ("t0123456789ab:k-1", "t0123456789ab", "k-1"), ("0042", None, "0042")])
def test_a_markers_idempotency_key_is_kept_in_its_text_and_read_back(stored: str, namespace: str | None, shown: str) -> None:
    key = MarkerKey(stored, body_hash("lesson", "Body text.", {}), namespace)
    lesson = render_log_entry("lesson", req(), API, marker_id="m1", at=AT, key=key)
    [milestone] = milestone_records(render_log_entry("milestone", req("milestone"), API, marker_id="m2", at=AT, key=key), milestone_path("api", AT))
    signal = signal_record(render_signal(req("signal"), API, marker_id="m3", at=AT, key=key), signal_path("t", "warning", AT))
    decision = decision_record(render_decision(req("decision"), API, number=3, marker_id="m4", at=AT, key=key), decision_path(3, "t"))
    for record in (*lesson_records(lesson, lesson_path(AT)), milestone, signal, decision):
        assert MarkerKey.read(record.meta) == key and MarkerKey.read(record.meta).shown == shown  # type: ignore[union-attr]
    assert f'"idempotency_key": "{stored}"' in lesson
    old = render_log_entry("lesson", req(), API, marker_id="m1", at=AT)  # an entry written before keys were kept
    [record] = lesson_records(old, lesson_path(AT))
    assert MarkerKey.read(record.meta) is None and "idempotency_key" not in record.meta and record.meta["marker_id"] == "m1"


def test_a_hand_edited_key_in_a_marker_is_not_read_as_one() -> None:
    h = "0123456789abcdef"
    assert MarkerKey.read({"idempotency_key": "two words", "body_hash": h}) is None
    assert MarkerKey.read({"idempotency_key": "k\n", "body_hash": h}) is None
    assert MarkerKey.read({"idempotency_key": "k", "body_hash": "not hex"}) is None
    assert MarkerKey.read({"idempotency_key": 42, "body_hash": h}) is None
    assert MarkerKey.read({"idempotency_key": "k", "body_hash": h, "key_namespace": "t1"}) == MarkerKey("k", h)  # no such prefix: no namespace
