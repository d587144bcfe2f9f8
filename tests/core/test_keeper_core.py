"""The keeper's pure core (UPSTREAM.md 4.2, 4.3, 5.4): inline markers, heat and status, regions and moves,
signal and inject collection, inline records, the keeper's files and the verifier. No database."""

from __future__ import annotations

import datetime as dt
import sys
import time
from pathlib import Path

import pytest

from brain_core.entries import EntryRecord, entry_id
from brain_core.feed.collect import collect_injects, collect_signals, mitigate, mitigation_sources
from brain_core.feed.keeper_files import NO_INJECT, NO_SIGNALS, render_dashboard, render_inject_file, render_last_tick_diff, render_signals_file, same_content
from brain_core.heat import ArcActivity, HeatRules, age_days, arc_activity, heat_of, status_of
from brain_core.membership import inject_applies, inject_is_fleet, inject_is_live, signal_is_fleet
from brain_core.vault import frontmatter
from brain_core.vault.inline import parse_attrs, parse_markers
from brain_core.vault.records import arc_record_of, document_records, inline_records
from brain_core.vault.regions import (
    CONSCIOUS_DIR,
    UNCONSCIOUS_DIR,
    canonical_id,
    clash_free,
    drained_changes,
    graduation_dir,
    inbox_destination,
    is_inbox_note,
    live_paths,
    place,
    region_of_folder,
)
from brain_kernel.settings import Settings
from brain_kernel.ticks.verifier import ERROR, FAIL, PASS, SKIP, Verifier

NOW = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.timezone.utc)
RULES = HeatRules()  # upstream's defaults: promote 5, demote 3, graduate 1 after 14 days, decay from day 7 every 4 days


def _ago(**delta: float) -> dt.datetime:
    return NOW - dt.timedelta(**delta)


# -- inline markers (UPSTREAM.md 4.3) ------------------------------------------------------------------


def test_block_and_inline_forms_with_quoted_and_unquoted_attributes() -> None:
    text = (
        "# Arc\n"
        '<!-- @signal severity=warning source=ci verify="test -f /tmp/x > /dev/null" -->\n'
        "   CI is red on main.\n"
        "   Second line.\n\n"
        "<!-- @/signal -->\n"
        "<!-- @edge type=parent target=2026-11-28-api-abc -->\n"
    )
    first, edge = parse_markers(text)
    assert (first.type, first.block, first.line) == ("signal", True, 2)
    assert first.attrs == {"severity": "warning", "source": "ci", "verify": "test -f /tmp/x > /dev/null"}
    assert first.content == "CI is red on main.\n   Second line."  # trimmed at both ends
    assert first.first_line == "CI is red on main."
    assert (edge.type, edge.block, edge.content, edge.line) == ("edge", False, "", 7)
    assert edge.attrs == {"type": "parent", "target": "2026-11-28-api-abc"}


def test_unquoted_values_stop_at_whitespace_and_the_closing_comment() -> None:
    (marker,) = parse_markers("<!-- @inject target=claude.md ttl_days=7-->")
    assert marker.attrs == {"target": "claude.md", "ttl_days": "7"}
    assert parse_attrs('a=1 b="two words" c=x>y a=3') == {"a": "3", "b": "two words", "c": "x"}
    assert parse_attrs("k=v\tnext=w") == {"k": "v", "next": "w"}


def test_markers_inside_a_block_are_its_content_not_markers() -> None:
    text = "<!-- @decision date=2026-11-01 -->\nUse Postgres.\n<!-- @signal severity=critical -->\n<!-- @lesson -->\n<!-- @/decision -->\n<!-- @lesson -->"
    markers = parse_markers(text)
    assert [(m.type, m.block) for m in markers] == [("decision", True), ("lesson", False)]
    assert markers[0].content == "Use Postgres.\n<!-- @signal severity=critical -->\n<!-- @lesson -->"
    assert markers[0].attrs == {"date": "2026-11-01"}
    assert markers[1].line == 6


def test_edge_is_inline_only_even_with_a_closing_comment() -> None:
    markers = parse_markers("<!-- @edge type=sibling target=c2 -->\nnot content\n<!-- @/edge -->")
    assert [(m.type, m.block, m.content) for m in markers] == [("edge", False, "")]


def test_two_same_type_markers_then_one_closing_is_an_inline_marker_then_a_block() -> None:
    text = "<!-- @signal severity=info source=a -->\nbetween\n<!-- @signal severity=critical source=b -->\nthe block\n<!-- @/signal -->"
    first, second = parse_markers(text)
    assert (first.block, first.content, first.attrs["source"], first.line) == (False, "", "a", 1)
    assert (second.block, second.content, second.attrs["source"], second.line) == (True, "the block", "b", 3)


def test_text_without_markers_and_plain_comments() -> None:
    assert parse_markers("") == []
    assert parse_markers("no markers at all\n# heading\n") == []
    assert parse_markers("<!-- a plain comment -->\n<!-- @ not a marker -->") == []


def test_line_numbers_count_from_one_in_document_order() -> None:
    text = (
        "\n\n<!-- @lesson -->\nx\n<!-- @/lesson -->\n\n<!-- @todo priority=high -->\n<!-- @milestone status=done scope=api -->\nshipped\n<!-- @/milestone -->"
    )
    markers = parse_markers(text)
    assert [(m.type, m.line, m.block) for m in markers] == [("lesson", 3, True), ("todo", 7, False), ("milestone", 8, True)]
    assert markers[2].attrs == {"status": "done", "scope": "api"}


# -- heat and status (UPSTREAM.md 5.4 step 3) ----------------------------------------------------------


def _activity(hours: float | None, *, sessions: int = 0, tools: int = 0, joy: int = 0, status: str | None = None) -> ArcActivity:
    return ArcActivity(last_active=None if hours is None else _ago(hours=hours), sessions=sessions, tool_calls=tools, joy_markers=joy, status=status)


@pytest.mark.parametrize(("hours", "expected"), [(0, 3), (24, 3), (24.5, 1), (72, 1), (72.5, 0), (None, 0)])
def test_heat_age_term(hours: float | None, expected: int) -> None:
    assert heat_of(_activity(hours), NOW, RULES) == expected


@pytest.mark.parametrize(("tools", "expected"), [(0, 0), (999, 0), (1000, 2), (1999, 2), (2000, 4), (2500, 4), (9000, 4)])
def test_heat_tools_term_capped_at_4(tools: int, expected: int) -> None:
    assert heat_of(_activity(100, tools=tools), NOW, RULES) == expected


@pytest.mark.parametrize(("sessions", "expected"), [(0, 0), (1, 1), (2, 2), (3, 3), (7, 3)])
def test_heat_sessions_term_capped_at_3(sessions: int, expected: int) -> None:
    assert heat_of(_activity(100, sessions=sessions), NOW, RULES) == expected


def test_heat_joy_active_and_replay_boost_terms() -> None:
    assert heat_of(_activity(100, joy=1), NOW, RULES) == 1
    assert heat_of(_activity(100, joy=5), NOW, RULES) == 1
    assert heat_of(_activity(100, status="active"), NOW, RULES) == 2
    assert heat_of(_activity(100, status="complete"), NOW, RULES) == 0
    assert heat_of(_activity(100, status="complete"), NOW, RULES, status="active") == 2  # the status it will carry
    assert heat_of(_activity(100, status="active"), NOW, RULES, status="stalled") == 0
    assert heat_of(_activity(100), NOW, RULES, replay_boost=2) == 2


@pytest.mark.parametrize(("days", "expected"), [(7, 3), (8, 3), (10, 3), (11, 2), (14, 2), (15, 1), (19, 0), (40, 0)])
def test_heat_decay_after_decay_start_per_interval(days: int, expected: int) -> None:
    # 3 sessions, no other term: decay (age_days - 7) // 4 once the age passes 7 days; never below 0.
    assert heat_of(_activity(days * 24 + 1, sessions=3), NOW, RULES) == expected


def test_heat_decay_with_the_deployed_settings() -> None:
    rules = HeatRules(decay_start_days=2, decay_interval_days=2)
    assert heat_of(_activity(10 * 24, sessions=3, tools=4000, joy=1), NOW, rules) == 8 - 4
    assert heat_of(_activity(10 * 24, sessions=3), NOW, HeatRules(decay_start_days=2, decay_interval_days=0)) == 0  # interval at least 1


def test_heat_clamped_to_ten() -> None:
    assert heat_of(_activity(1, sessions=5, tools=5000, joy=3, status="active"), NOW, RULES, replay_boost=4) == 10


def test_upstream_signals_text_and_our_mapping_give_the_same_evidence() -> None:
    created = (NOW - dt.timedelta(hours=30)).isoformat()
    text = {"created": created, "signals": "{errors: 3, joy: 2, tools: 2500}", "source_sessions": ["s1", "s2"], "status": "complete"}
    upstream = arc_activity(text)
    assert (upstream.tool_calls, upstream.joy_markers, upstream.sessions, upstream.status) == (2500, 2, 2, "complete")
    # the same line read back through the frontmatter codec is a YAML flow map
    doc = frontmatter.parse(f"---\ncreated: {created}\nsignals: {{errors: 3, joy: 2, tools: 2500}}\nsource_sessions: [s1, s2]\nstatus: complete\n---\n")
    assert arc_activity(doc.meta) == upstream
    ours = arc_activity({"created": created, "signals": {"tool_calls": 2500, "joy_markers": 2}, "source_sessions": ["s1", "s2"], "status": "Complete"})
    assert ours == upstream
    # age (30 h) +1, tools +4, sessions +2, joy +1
    assert heat_of(upstream, NOW, RULES) == 8
    assert heat_of(upstream, NOW, RULES, status="active") == 10
    assert heat_of(arc_activity({**text, "signals": "{errors: 3, joy: 0, tools: 1999}"}), NOW, RULES) == 1 + 2 + 2
    assert heat_of(arc_activity({**text, "signals": {"tool_calls": 999, "joy_markers": 0}, "source_sessions": "s1"}), NOW, RULES) == 1 + 1


def test_source_sessions_as_a_single_string_counts_one() -> None:
    assert arc_activity({"source_sessions": "abc-123"}).sessions == 1
    assert arc_activity({"source_sessions": "  "}).sessions == 0
    assert arc_activity({"source_sessions": ["a", "", None, "b"]}).sessions == 2
    assert arc_activity({}).sessions == 0


def test_age_comes_from_the_latest_recorded_activity_else_the_mtime() -> None:
    meta = {"created": "2026-11-01", "signals": {"tool_calls": 10, "last_active": (NOW - dt.timedelta(hours=3)).isoformat()}}
    assert age_days(arc_activity(meta), NOW) == 0
    mtime = NOW - dt.timedelta(days=9, hours=1)
    assert age_days(arc_activity({}, mtime=mtime), NOW) == 9
    assert arc_activity({}).last_active is None
    assert age_days(arc_activity({}), NOW) is None


@pytest.mark.parametrize(
    ("status", "hours", "expected"),
    [
        (None, 1, "active"),
        ("active", 6, "active"),
        ("active", 7, "complete"),
        ("active", 48, "complete"),
        ("active", 49, "stalled"),
        (None, 49, "stalled"),
        ("complete", 100, "complete"),
        ("stalled", 20, "stalled"),
        ("complete", 2, "active"),  # new activity reopens
        ("stalled", 5, "active"),
        ("graduated", 1, "graduated"),
        ("resolved", 1, "resolved"),
        ("merged", 1, "merged"),
        ("abandoned", 1, "abandoned"),
        ("active", None, "active"),  # undated: leave what the file says
        (None, None, None),
    ],
)
def test_status_rule(status: str | None, hours: float | None, expected: str | None) -> None:
    assert status_of(_activity(hours, status=status), NOW) == expected


# -- regions: the scan set, moves, the inbox (UPSTREAM.md 5.4 steps 0, 1, 4, 6) -------------------------


def test_canonical_id_strips_md_and_every_trailing_merged() -> None:
    assert canonical_id("clusters/2026-11-28/a.md") == "a"
    assert canonical_id("left/a.merged.md") == "a"
    assert canonical_id("left/a.merged.merged.md") == "a"
    assert canonical_id("a.merged.x.md") == "a.merged.x"
    assert canonical_id("frontal-lobe/conscious/2026-11-28-x") == "2026-11-28-x"


def test_merged_tombstone_suppresses_its_raw_file_in_the_same_folder_only() -> None:
    paths = ["clusters/2026-11-28/a.md", "clusters/2026-11-28/a.merged.md", "clusters/2026-11-29/a.md", "left/b.md", "left/b.merged.merged.md"]
    scan = live_paths(paths)
    assert scan.live == ("clusters/2026-11-29/a.md",)
    assert set(scan.suppressed) == {"clusters/2026-11-28/a.md", "left/b.md"}
    assert set(scan.tombstones) == {"clusters/2026-11-28/a.merged.md", "left/b.merged.merged.md"}


def test_dedupe_prefers_the_region_copy_and_skips_underscore_files() -> None:
    arc = "2026-11-28-api-abc.md"
    paths = [f"clusters/2026-11-28/{arc}", f"{CONSCIOUS_DIR}/{arc}", "clusters/2026-11-28/_dashboard.md", "left/_index.md", "bridge/vision.md"]
    scan = live_paths(paths, arc_like=[f"clusters/2026-11-28/{arc}", f"{CONSCIOUS_DIR}/{arc}"])
    assert scan.live == ("bridge/vision.md", f"{CONSCIOUS_DIR}/{arc}")  # region dirs in scan order, then clusters
    assert scan.duplicates == (f"clusters/2026-11-28/{arc}",)
    # documents that cannot be arcs are never deduplicated by name
    logs = live_paths(["left/reference/lessons.md", "right/ideas/lessons.md"])
    assert logs.live == ("left/reference/lessons.md", "right/ideas/lessons.md")


def _place(
    path: str, heat: int, *, status: str | None = "active", age: int | None = 1, region: str | None = "left-hemisphere", promote: int = 5, demote: int = 3
):
    return place(path, heat=heat, status=status, age_days=age, region=region, promote=promote, demote=demote, graduate=1, graduate_age_days=14)


def test_promote_from_clusters_and_unconscious_to_conscious() -> None:
    for path in ("clusters/2026-11-28/x.md", f"{UNCONSCIOUS_DIR}/x.md", "frontal-lobe/x.md"):
        moved = _place(path, 5)
        assert (moved.path, moved.action, moved.graduate) == (f"{CONSCIOUS_DIR}/x.md", "promote", False), path
        assert _place(path, 4).path is None
    assert _place(f"{CONSCIOUS_DIR}/x.md", 9).path is None  # already there


def test_hysteresis_between_demote_and_promote() -> None:
    assert _place(f"{CONSCIOUS_DIR}/x.md", 4).path is None
    assert _place(f"{CONSCIOUS_DIR}/x.md", 3).path is None
    demoted = _place(f"{CONSCIOUS_DIR}/x.md", 2)
    assert (demoted.path, demoted.action, demoted.graduate) == (f"{UNCONSCIOUS_DIR}/x.md", "demote", False)
    assert _place(f"{UNCONSCIOUS_DIR}/x.md", 2).path is None
    assert _place("clusters/2026-11-28/x.md", 0).path is None  # cold but young: stays


def test_region_documents_never_promote_or_demote() -> None:
    assert _place("left/projects/api/notes.md", 10).action is None
    assert _place("bridge/vision.md", 0).action is None


@pytest.mark.parametrize(
    ("region", "folder"),
    [
        ("left-hemisphere", "left"),
        ("right-hemisphere", "right"),
        ("amygdala", "amygdala"),
        ("bridge", "bridge"),
        ("pineal", "pineal"),
        ("frontal-lobe", "left"),
        (None, "left"),
        ("Amygdala ", "amygdala"),
    ],
)
def test_graduation_from_working_memory_to_the_region_folder(region: str | None, folder: str) -> None:
    assert graduation_dir(region) == folder
    for path in ("clusters/2026-11-01/x.md", f"{CONSCIOUS_DIR}/x.md", f"{UNCONSCIOUS_DIR}/x.md"):
        moved = _place(path, 1, status="stalled", age=15, region=region)
        assert (moved.path, moved.action, moved.graduate) == (f"{folder}/x.md", "graduate", True)


def test_graduation_conditions() -> None:
    path = "clusters/2026-11-01/x.md"
    assert _place(path, 2, status="stalled", age=30).action is None  # not cold enough
    assert _place(path, 1, status="stalled", age=14).action is None  # not old enough
    assert _place(path, 0, status="stalled", age=None).action is None  # undated
    assert _place(path, 0, status="stalled", age=15).action == "graduate"


def test_graduation_in_place_for_arcs_already_in_a_region_subfolder() -> None:
    for path in ("left/projects/api/x.md", "amygdala/2026-11-01-incident.md", "right/ideas/x.md"):
        stamped = _place(path, 0, status="stalled", age=30, region="right-hemisphere")
        assert (stamped.path, stamped.action, stamped.graduate) == (None, "graduate", True), path


def test_graduated_arcs_never_move() -> None:
    for path in ("left/x.md", "clusters/2026-11-01/x.md", f"{CONSCIOUS_DIR}/x.md"):
        for heat in (0, 5, 10):
            assert _place(path, heat, status="graduated", age=60).action is None, (path, heat)


def test_inbox_destination_by_first_known_tag() -> None:
    assert inbox_destination({"tags": ["misc", "idea", "bug"]}) == "right/ideas"
    assert inbox_destination({"tags": ["bug", "idea"]}) == "left"
    assert inbox_destination({"tags": "notes, Research, idea"}) == "left/research"
    assert inbox_destination({"tags": ["#incident"]}) == "left/incidents"
    assert inbox_destination({"tags": "brain-system"}) == "bridge"
    assert inbox_destination({"tags": ["vision"]}) == "right"
    assert inbox_destination({"tags": ["unknown"]}) == "left"
    assert inbox_destination({}) == "left"
    assert region_of_folder("left/research") == "left-hemisphere"
    assert region_of_folder("right") == "right-hemisphere"
    assert region_of_folder("bridge") == "bridge"


def test_a_drained_note_that_names_a_project_reads_as_that_projects_arc() -> None:
    note = {"title": "n", "project": "alpha", "repo": "org/alpha"}
    changes = drained_changes(note, "left/research")
    assert changes == {"region": "left-hemisphere", "status": "active", "projects": ["alpha"], "project_source": "inbox"}
    arc = arc_record_of(frontmatter.Document({**note, **changes}, "body"), "left/research/n.md")
    assert arc is not None and (arc.project, arc.projects, arc.repo) == ("alpha", ("alpha",), "org/alpha")
    # What the note already says stays; a project that is no key, or none, attributes nothing.
    assert drained_changes({**note, "projects": ["beta"], "status": "open", "region": "bridge"}, "bridge") == {}
    assert "projects" not in drained_changes({"project": "../../amygdala"}, "left")
    assert "projects" not in drained_changes({"title": "fleet note"}, "left")


def test_inbox_notes_exclude_readme_underscore_and_subfolders() -> None:
    assert is_inbox_note("raw/inbox/idea.md")
    assert not is_inbox_note("raw/inbox/README.md")
    assert not is_inbox_note("raw/inbox/readme.md")
    assert not is_inbox_note("raw/inbox/_template.md")
    assert not is_inbox_note("raw/inbox/sub/idea.md")
    assert not is_inbox_note("raw/inbox/idea.txt")
    assert not is_inbox_note("raw/articles/idea.md")
    assert clash_free("idea.md", False, "120000") == "idea.md"
    assert clash_free("idea.md", True, "120000") == "idea-120000.md"


# -- collection: mitigation, signals, inject blocks (UPSTREAM.md 5.4 steps 7, 8, 10) ------------------------


def _signal(
    content: str, *, source: str = "ci", severity: str = "warning", at: dt.datetime | None = NOW, status: str | None = None, n: int = 0, path: str = "left/x.md"
) -> EntryRecord:
    return EntryRecord(
        id=entry_id("signal", path, f"{content}:{n}"),
        kind="signal",
        vault_path=path,
        content=content,
        severity=severity,
        status=status,
        occurred_at=at,
        meta={"source": source, "inline": True},
    )


def _arc_entry(path: str, status: str, mitigates: object) -> EntryRecord:
    return EntryRecord(id=entry_id("arc", path), kind="arc", vault_path=path, status=status, meta={"mitigates": mitigates})


def test_signals_deduplicated_by_source_and_content_hash() -> None:
    got = collect_signals(
        [_signal("CI red", n=0), _signal("  CI red\n", n=1), _signal("CI red", source="deploy", n=2), _signal("Other", n=3)],
        NOW,
        stale_days=3,
    )
    assert (got.collected, got.deduped, len(got.kept)) == (4, 1, 3)
    assert {(r.meta["source"], r.content.strip()) for r in got.kept} == {("ci", "CI red"), ("deploy", "CI red"), ("ci", "Other")}


def test_cleared_signals_dropped_wherever_the_marker_sits() -> None:
    got = collect_signals(
        [
            _signal("Disk full on db-1\nrecovered (CLEARED: disk grown)"),
            _signal("(CLEARED: fixed) first line"),
            _signal("tombstone", severity="resolved"),
            _signal("cleared by status", status="resolved"),
            _signal("still live"),
        ],
        NOW,
        stale_days=3,
    )
    assert got.cleared == 4
    assert [r.content for r in got.kept] == ["still live"]


def test_stale_only_for_dated_signals_below_critical() -> None:
    old = NOW - dt.timedelta(days=4)
    got = collect_signals(
        [
            _signal("old warning", at=old),
            _signal("old info", severity="info", at=old),
            _signal("old critical", severity="critical", at=old),
            _signal("old nuclear", severity="NUCLEAR", at=old),
            _signal("undated", at=None),
            _signal("recent", at=NOW - dt.timedelta(days=2)),
        ],
        NOW,
        stale_days=3,
    )
    assert got.stale == 2
    assert {r.content for r in got.kept} == {"old critical", "old nuclear", "undated", "recent"}


def test_mitigation_by_resolved_or_graduated_arcs() -> None:
    arcs = [
        _arc_entry("left/a.md", "resolved", "ci"),
        _arc_entry("left/b.md", "graduated", ["deploy", "dns"]),
        _arc_entry("left/c.md", "Resolved", "[disk, 'mem']"),
        _arc_entry("left/d.md", "active", "cache"),  # not finished: mitigates nothing yet
        _arc_entry("left/e.md", "complete", "queue"),
    ]
    assert mitigation_sources(arcs) == {"ci", "deploy", "dns", "disk", "mem"}
    signals = [_signal(f"{s} alarm", source=s) for s in ("ci", "dns", "mem", "cache", "queue")]
    marked = mitigate([*arcs, *signals])
    by_source = {r.meta["source"]: r for r in marked if r.kind == "signal"}
    assert {s for s, r in by_source.items() if r.status == "mitigated"} == {"ci", "dns", "mem"}
    assert by_source["ci"].meta["mitigated_by"] == "ci"
    got = collect_signals(marked, NOW, stale_days=3)
    assert got.mitigated == 3
    assert {r.meta["source"] for r in got.kept} == {"cache", "queue"}
    assert mitigate(signals) == signals  # no resolved arc: nothing changes


def _inject(
    content: str, *, status: str | None = "active", at: dt.datetime | None = NOW, ttl: str | None = None, inline: bool = True, n: int = 0
) -> EntryRecord:
    meta: dict[str, object] = {"inline": True} if inline else {}
    if ttl is not None:
        meta["ttl_days"] = ttl
    return EntryRecord(
        id=entry_id("inject", "left/x.md", f"{content}:{n}"), kind="inject", vault_path="left/x.md", content=content, status=status, occurred_at=at, meta=meta
    )


@pytest.mark.parametrize("status", ["resolved", "graduated", "merged", "MERGED"])
def test_inject_in_a_finished_arc_is_dead(status: str) -> None:
    assert not inject_is_live(_inject("x", status=status), NOW)
    assert inject_is_live(_inject("x", status=status, inline=False), NOW)  # a feed file's own status is not a parent's


@pytest.mark.parametrize("status", ["complete", "stalled"])
def test_inject_in_an_arc_quiet_for_six_hours_lives_its_ttl(status: str) -> None:
    """`complete` and `stalled` say only how long the arc has been quiet (ADR 0014): an inbox note's block stays."""
    assert inject_is_live(_inject("x", status=status, at=NOW - dt.timedelta(days=3), ttl="7"), NOW)
    assert not inject_is_live(_inject("x", status=status, at=NOW - dt.timedelta(days=8), ttl="7"), NOW)


def test_inject_age_limits() -> None:
    old = NOW - dt.timedelta(days=31)
    assert inject_is_live(_inject("x", status="active"), NOW)
    assert inject_is_live(_inject("x", status="stalled", at=None), NOW)  # undated kept
    assert not inject_is_live(_inject("x", at=old), NOW)
    assert inject_is_live(_inject("x", at=NOW - dt.timedelta(days=29)), NOW)
    assert inject_is_live(_inject("x", at=old), NOW, stale_days=0)  # 0 disables
    assert inject_is_live(_inject("x", at=old, ttl="40"), NOW)  # ttl_days beats the default
    assert not inject_is_live(_inject("x", at=NOW - dt.timedelta(days=3), ttl="2"), NOW)
    assert inject_is_live(_inject("x", at=old, ttl="0"), NOW)
    assert not inject_is_live(_inject("x", at=old, ttl="soon"), NOW)  # unreadable ttl: the default


def test_collect_injects_dedupes_live_blocks_by_content() -> None:
    blocks = [
        _inject("Run the tests.", n=0),
        _inject("  Run the tests.\n", n=1),
        _inject("Old advice", at=NOW - dt.timedelta(days=60), n=2),
        _inject("Done arc", status="resolved", n=3),
    ]
    kept, total = collect_injects(blocks, NOW, stale_days=30)
    assert total == 4
    assert [b.content.strip() for b in kept] == ["Run the tests."]
    # a dead copy does not hide a live one with the same text
    kept, _ = collect_injects([_inject("Same", status="resolved", n=0), _inject("Same", n=1)], NOW, stale_days=30)
    assert len(kept) == 1 and kept[0].status == "active"


# -- inline records (markers carry the project of the arc that holds them) -----------------------------------

ARC_PATH = "clusters/2026-11-28/2026-11-28-api-abc.md"
ARC_TEXT = """---
cluster_id: 2026-11-28-api-abc
title: Fix the api
region: left-hemisphere
status: active
heat: 7
project: api
projects: [api]
repo: org1/api
project_source: git
created: 2026-11-28T09:00:00Z
signals: {errors: 3, joy: 2, tools: 2500}
---

Worked on the api.
<!-- @signal severity=Critical source=ci -->
CI red on main
<!-- @/signal -->
<!-- @signal severity=warning source=disk -->
Disk at 91% (CLEARED: grown)
<!-- @/signal -->
<!-- @inject target=all ttl_days=2 -->
Run the tests first.
<!-- @/inject -->
<!-- @lesson -->
Pin the driver.
<!-- @/lesson -->
<!-- @edge type=sibling target=2026-11-27-api-xyz -->
"""
CREATED = dt.datetime(2026, 11, 28, 9, 0, tzinfo=dt.timezone.utc)


def _arc_rows() -> list[EntryRecord]:
    return document_records(frontmatter.parse(ARC_TEXT), ARC_PATH, "arc")


def test_markers_in_an_arc_carry_its_project_and_created() -> None:
    arc, critical, cleared, inject, lesson = _arc_rows()  # the edge is not a record
    assert arc.kind == "arc" and arc.project == "api"
    for row in (critical, cleared, inject, lesson):
        assert (row.project, row.projects, row.repo, row.occurred_at) == ("api", ("api",), "org1/api", CREATED)
        assert row.meta["parent"] == "2026-11-28-api-abc" and row.meta["inline"] is True
    assert (critical.kind, critical.severity, critical.status, critical.content, critical.meta["source"]) == (
        "signal",
        "critical",
        None,
        "CI red on main",
        "ci",
    )
    assert (cleared.severity, cleared.status) == ("warning", "resolved")
    assert (inject.kind, inject.status, inject.meta["target"], inject.meta["ttl_days"]) == ("inject", "active", "all", "2")
    assert lesson.kind == "lesson" and lesson.content == "Pin the driver."
    assert not signal_is_fleet(critical)


def test_an_inject_in_a_project_arc_reaches_that_project_only() -> None:
    inject = _arc_rows()[3]
    assert not inject_is_fleet(inject)
    assert inject.scope == "project"
    assert inject_applies(inject, "api", "org1/api", key_is_unique=True)
    assert not inject_applies(inject, "web", "org1/web", key_is_unique=True)
    assert not inject_applies(inject, "api", "org2/api", key_is_unique=False)


def test_the_arc_rows_feed_the_collection() -> None:
    rows = _arc_rows()
    got = collect_signals(rows, NOW, stale_days=3)
    assert [r.content for r in got.kept] == ["CI red on main"] and got.cleared == 1
    kept, total = collect_injects(rows, NOW, stale_days=30)  # created 27 h ago, ttl_days=2
    assert total == 1 and [b.content for b in kept] == ["Run the tests first."]
    kept, _ = collect_injects(rows, CREATED + dt.timedelta(days=2, hours=1), stale_days=30)
    assert kept == []


def test_a_standing_documents_markers_are_unattributed_unless_it_names_a_project() -> None:
    text = "# Runbook\n<!-- @signal severity=warning source=dns -->\nDNS flaps\n<!-- @/signal -->\n<!-- @inject -->\nCheck DNS first.\n<!-- @/inject -->\n"
    signal, inject = document_records(frontmatter.parse(text), "left/reference/runbook.md", "region")
    assert (signal.project, signal.projects, signal.repo, signal.occurred_at) == (None, (), None, None)
    assert signal.meta["parent"] == "runbook"
    assert signal_is_fleet(signal)
    assert inject.scope == "fleet" and inject_is_fleet(inject)
    assert inject_applies(inject, "web", "org1/web", key_is_unique=True)
    named = document_records(frontmatter.parse("---\nproject: api\ncreated: 2026-11-20\n---\n" + text), "left/reference/runbook.md", "region")
    assert named[0].project == "api" and named[0].projects == ("api",)
    assert named[0].occurred_at == dt.datetime(2026, 11, 20, tzinfo=dt.timezone.utc)
    assert not signal_is_fleet(named[0])
    assert named[1].scope == "project" and not inject_is_fleet(named[1])


def test_inline_ids_stable_across_reruns_and_distinct_for_identical_markers() -> None:
    first = [r.id for r in _arc_rows()]
    assert first == [r.id for r in _arc_rows()]
    assert len(set(first)) == len(first)
    text = "<!-- @signal source=ci -->\nsame\n<!-- @/signal -->\n<!-- @signal source=ci -->\nsame\n<!-- @/signal -->\n"
    rows = inline_records(frontmatter.parse(text), "left/x.md", None)
    assert len(rows) == 2 and rows[0].id != rows[1].id
    assert [r.id for r in rows] == [r.id for r in inline_records(frontmatter.parse(text), "left/x.md", None)]
    # both are collected; the dedupe (source, hash) keeps one
    got = collect_signals(rows, NOW, stale_days=3)
    assert (got.collected, got.deduped, len(got.kept)) == (2, 1, 1)


def test_an_inline_marker_with_a_text_attribute_and_no_body() -> None:
    rows = inline_records(frontmatter.parse('<!-- @lesson text="Always pin versions" -->'), "left/x.md", None)
    assert [(r.kind, r.content) for r in rows] == [("lesson", "Always pin versions")]


def test_an_inline_signal_without_severity_shows_as_info() -> None:
    (row,) = inline_records(frontmatter.parse("<!-- @signal -->\nno severity\n<!-- @/signal -->"), "left/x.md", None)
    assert "- **[info]** (unknown) no severity _(fleet)_" in render_signals_file([row], NOW)


# -- the keeper's files --------------------------------------------------------------------------------------


def test_empty_signals_and_inject_files() -> None:
    signals = frontmatter.parse(render_signals_file([], NOW))
    assert signals.body.strip() == NO_SIGNALS == "No active signals."
    assert (signals.meta["id"], signals.meta["title"], signals.meta["severity"]) == ("signals", "Active Signals", "info")
    inject = frontmatter.parse(render_inject_file([], NOW))
    assert inject.body.strip() == NO_INJECT == "No inject blocks."
    assert (inject.meta["id"], inject.meta["title"]) == ("inject", "Brain Inject")


def test_signal_lines_with_their_scope() -> None:
    arc_signal = _arc_rows()[1]
    fleet = EntryRecord(id="signal:amygdala/x.md", kind="signal", vault_path="amygdala/x.md", content="\nDNS flaps\nmore", severity=None, meta={})
    keyed = EntryRecord(
        id="signal:left/y.md", kind="signal", vault_path="left/y.md", content="Key only", project="web", severity="info", meta={"source": "lint"}
    )
    doc = frontmatter.parse(render_signals_file([arc_signal, fleet, keyed], NOW))
    lines = doc.body.strip().splitlines()
    assert lines[0] == "## Signals \u2014 2026-11-29"
    assert lines[2:] == [
        "- **[critical]** (ci) CI red on main _(project: org1/api)_",
        "- **[info]** (unknown) DNS flaps _(fleet)_",
        "- **[info]** (lint) Key only _(project: web)_",
    ]
    assert doc.meta["severity"] == "critical"


def test_inject_lines() -> None:
    inject = _arc_rows()[3]
    fleet = EntryRecord(id="inject:left/z.md", kind="inject", vault_path="left/z.md", content="Be brief.\n", meta={"target": "claude.md"})
    body = frontmatter.parse(render_inject_file([inject, fleet], NOW)).body
    assert "Run the tests first." not in body  # a project's block: its project feed serves it, not the fleet's file
    assert body.strip() == "**[claude.md]** Be brief."


def test_dashboard_table() -> None:
    arc = arc_record_of(frontmatter.parse(ARC_TEXT), ARC_PATH)
    assert arc is not None
    assert render_dashboard("2026-11-28", [arc]).splitlines() == [
        "# Cluster Dashboard \u2014 2026-11-28",
        "",
        "| Arc | Heat | Region | Status | Title |",
        "|---|---|---|---|---|",
        "| [[2026-11-28-api-abc]] | 7 | left-hemisphere | active | Fix the api |",
    ]


def test_same_content_ignores_only_the_volatile_stamp_lines() -> None:
    counts = {"promotions": 2, "heat_changes": 5}
    first = render_last_tick_diff(NOW, counts)
    later = render_last_tick_diff(NOW + dt.timedelta(minutes=30), counts)
    assert first != later and same_content(first, later)
    assert not same_content(first, render_last_tick_diff(NOW, {**counts, "promotions": 3}))
    assert not same_content(None, first)
    assert "Promotions: 2" in first and "Heat changes: 5" in first and "Edges added: 0" in first
    stamped = "---\nid: x\ngenerated: 2026-11-29T12:00:00Z\n---\n\n## What the operator is likely doing (2026-11-29 12:00 UTC)\n\nShipping.\n"
    assert same_content(stamped, stamped.replace("12:00", "13:05"))
    assert not same_content(stamped, stamped.replace("Shipping.", "Testing."))
    # the signals header carries the day and is not a stamp line: a new day rewrites the file
    assert not same_content(render_signals_file(_arc_rows()[1:2], NOW), render_signals_file(_arc_rows()[1:2], NOW + dt.timedelta(days=1)))


# -- the verifier (UPSTREAM.md 8 items 9 and 15 fixed) --------------------------------------------------------


def _verifier(*commands: str, enabled: bool = True, timeout: float = 5.0, dry_run: bool = False) -> Verifier:
    settings = Settings.explicit(verifier_enabled=enabled, verify_commands=list(commands), verify_timeout_s=timeout)
    return Verifier.from_settings(settings, dry_run=dry_run)


def test_verifier_skips_when_disabled_dry_or_not_allowlisted() -> None:
    assert _verifier("true", enabled=False).check("true") == SKIP
    assert _verifier("true", dry_run=True).check("true") == SKIP
    verifier = _verifier("true")
    assert verifier.check("false") == SKIP
    assert verifier.check("true --version") == SKIP  # the command exactly as allowlisted
    assert verifier.results == {}
    assert Verifier.from_settings(Settings.explicit()).check("true") == SKIP  # off by default


def test_verifier_outcomes() -> None:
    verifier = _verifier("true", "false", " true ", "/nonexistent/brain-verify-binary", 'echo "unterminated')
    assert verifier.check("true") == PASS
    assert verifier.check("  true\n") == PASS
    assert verifier.check("false") == FAIL
    assert verifier.check("/nonexistent/brain-verify-binary") == ERROR
    assert verifier.check('echo "unterminated') == ERROR


def test_verifier_timeout_is_an_error_and_quick() -> None:
    verifier = _verifier("sleep 5", timeout=0.2)
    started = time.monotonic()
    assert verifier.check("sleep 5") == ERROR
    assert time.monotonic() - started < 2


def test_verifier_runs_no_shell(tmp_path: Path) -> None:
    target = tmp_path / "touched"
    command = f"echo hi; touch {target}"
    verifier = _verifier(command, f"true && touch {target}", f"echo $(touch {target})")
    assert verifier.check(command) == PASS  # echo printed the rest as text
    verifier.check(f"true && touch {target}")  # true ignores its arguments
    verifier.check(f"echo $(touch {target})")
    assert not target.exists()


def test_verifier_runs_each_command_once_per_instance(tmp_path: Path) -> None:
    log = tmp_path / "runs.log"
    command = f"{sys.executable} -c \"open({str(log)!r}, 'a').write('x')\""
    verifier = _verifier(command)
    assert [verifier.check(command) for _ in range(3)] == [PASS, PASS, PASS]
    assert log.read_text() == "x"
    assert _verifier(command).check(command) == PASS  # the next tick runs it again
    assert log.read_text() == "xx"
