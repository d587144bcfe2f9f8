"""The pure feed core: heat and status, intent capping, feed assembly and the keeper's files."""

from __future__ import annotations

import datetime as dt
import json

from brain_core.entries import EntryRecord, entry_id
from brain_core.feed.envelope import answer_body, stamp_answer
from brain_core.feed.intent import ArcDigest, cap_intent, derive_intent, parse_intent_map, sentences
from brain_core.feed.keeper_files import FEED_FILES, feed_file_entry, global_feed, render_hot_arcs_file, render_project_intent_file
from brain_core.feed.project import ProjectMemory, ProjectRef, project_feed
from brain_core.feed.sections import HOT_ARCS_HEADER, hot_arcs_table
from brain_core.heat import arc_activity
from brain_core.membership import belongs
from brain_core.text import clip_words, has_lone_surrogate_char, one_line, storable
from brain_core.vault import frontmatter
from brain_core.vault.layout import kind_of_path
from brain_core.vault.records import arc_record_of, inject_record, intent_record, project_activity

NOW = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.timezone.utc)


def _arc(
    cid: str,
    title: str,
    *,
    heat: float = 1.0,
    project: str | None = "api",
    repo: str | None = "org1/api",
    projects: tuple[str, ...] = (),
    summary: str | None = None,
    status: str = "active",
) -> EntryRecord:
    path = f"clusters/2026-11-28/{cid}.md"
    return EntryRecord(
        id=entry_id("arc", path),
        kind="arc",
        vault_path=path,
        title=title,
        project=project,
        projects=projects,
        repo=repo,
        status=status,
        heat=heat,
        occurred_at=NOW - dt.timedelta(hours=1),
        meta={"cluster_id": cid, "region": "frontal-lobe", "summary": summary},
    )


# -- heat evidence (the formula is tested in tests/core/test_keeper_core.py) ----------------------


def test_arc_activity_reads_the_cluster_signals() -> None:
    meta = {
        "source_sessions": ["a", "b"],
        "created": "2026-11-20T10:00:00+00:00",
        "signals": {"tool_calls": 40, "joy_markers": 1, "last_active": "2026-11-28T10:00:00+00:00"},
    }
    activity = arc_activity(meta)
    assert activity.sessions == 2 and activity.tool_calls == 40 and activity.joy_markers == 1
    assert activity.last_active == dt.datetime(2026, 11, 28, 10, tzinfo=dt.timezone.utc)


def test_heat_and_the_index_read_the_same_last_activity() -> None:
    legacy = {"title": "Old", "last_activity": "2026-01-09T00:00:00Z", "created": "2025-12-01T00:00:00Z"}
    fresh = {"title": "New", "updated": "2026-11-29T09:00:00Z", "signals": {"last_active": "2026-11-28T10:00:00Z"}}
    for meta, expected in ((legacy, dt.datetime(2026, 1, 9, tzinfo=dt.timezone.utc)), (fresh, dt.datetime(2026, 11, 28, 10, tzinfo=dt.timezone.utc))):
        record = arc_record_of(frontmatter.parse(frontmatter.render(meta, "body\n")), "clusters/2026-11-28/arc-x.md")
        assert record is not None
        assert arc_activity(meta).last_active == record.occurred_at == expected


# -- intent ---------------------------------------------------------------------


def test_intent_is_capped_at_a_sentence_boundary_never_mid_sentence() -> None:
    text = "First sentence is here. Second one is a little longer than the first! Third? " + "Fourth sentence goes on and on. " * 20
    for cap in (30, 60, 100, 200, 400):
        capped = cap_intent(text, cap)
        assert capped.endswith((".", "!", "?"))
        for sentence in sentences(capped):
            assert sentence in sentences(text), (cap, sentence)
        assert len(capped) <= cap or len(sentences(capped)) == 1


def test_a_single_long_sentence_is_kept_whole() -> None:
    long = "This one sentence " + "keeps going " * 60 + "until it ends."
    assert cap_intent(long, 100) == " ".join(long.split())


def test_derived_intent_names_the_hottest_arc_first() -> None:
    arcs = [ArcDigest("a1", "Cold thing", heat=1.0), ArcDigest("a2", "Hot thing", heat=8.0, summary="Ship the parser rewrite", status="active")]
    intent = derive_intent(arcs, subject="org1/api")
    assert intent.startswith("Focus in org1/api: Ship the parser rewrite (active).")
    assert "Cold thing" in intent
    assert derive_intent([], subject="x") == "No active work in x right now."

    # tied heats keep the index's order, which the focus line reads too: both name the same arc
    tied = [ArcDigest("z-recent", "Auth cutover", heat=5.0), ArcDigest("a-older", "Claude inject", heat=5.0)]
    assert derive_intent(tied, subject="acme/api").startswith("Focus in acme/api: Auth cutover")


def test_llm_answers_are_parsed_filtered_and_capped() -> None:
    answer = '```json\n{"org1/api": "Finish auth. ' + "Then more. " * 80 + '", "other": "ignored", "org2/api": 5}\n```'
    parsed = parse_intent_map(answer, ["org1/api", "org2/api"], max_chars=60)
    assert list(parsed) == ["org1/api"]
    assert parsed["org1/api"].startswith("Finish auth.") and len(parsed["org1/api"]) <= 60
    assert parse_intent_map("not json", ["a"]) == {}


def test_one_line_collapses_whitespace_like_the_regex_it_replaced() -> None:
    import re

    for text in ["", "  a  b ", "a\n\n b\t\tc", "x\u00a0\u2028y\x1c z\u3000", "\r\n", "plain"]:
        assert one_line(text) == re.sub(r"\s+", " ", text).strip()
    assert one_line(None) == ""


def test_one_line_treats_every_character_as_the_control_table_does() -> None:
    """The printable shortcut changes no answer: each character of the Basic Multilingual Plane between two
    words gives what translating the control characters to spaces and collapsing whitespace gives."""
    from brain_core.text import _CONTROLS

    for point in range(0x10000):
        text = f"a{chr(point)}b {chr(point)}"
        assert one_line(text) == " ".join(text.translate(_CONTROLS).split()), hex(point)


def test_clip_words_cuts_on_a_word_boundary() -> None:
    clipped = clip_words("alpha beta gamma delta epsilon", 17)
    assert clipped == "alpha beta gamma…"
    assert clip_words("short", 17) == "short"
    # a word that is most of the line (a URL, a hash) is cut inside, never dropped to leave nothing
    url = "See https://example.com/" + "a" * 400 + " for the fix."
    assert clip_words(url, 60) == url[:59] + "…"
    assert clip_words("é" * 2000 + " tail", 300) == "é" * 299 + "…"


# -- hot arcs table and files ---------------------------------------------------------


def test_hot_arcs_table_has_the_project_column_and_summary_blurbs() -> None:
    arcs = [
        _arc("arc-1", "Title one | with pipe", heat=7, summary="A summary that wins over the title"),
        _arc("arc-2", "A very long title " * 20, heat=3.0, projects=("api", "web")),
    ]
    table = hot_arcs_table(arcs)
    lines = table.splitlines()
    assert lines[0] == HOT_ARCS_HEADER
    assert lines[2] == "| arc-1 | 7 | frontal-lobe | active | org1/api | A summary that wins over the title |"
    assert "org1/api, web" in lines[3]
    assert lines[3].rstrip(" |").endswith("…") and len(lines[3].rsplit(" | ", 1)[1]) <= 222  # upstream's 220-character blurb
    short = hot_arcs_table(arcs, blurb_chars=40).splitlines()[3].rsplit(" | ", 1)[1].removesuffix(" |")
    assert short == "A very long title A very long title A…"  # cut at the last space past 60% of the limit


def test_hot_arcs_file_keeps_the_frontmatter_clients_read() -> None:
    text = render_hot_arcs_file([_arc("arc-1", "t")], NOW)
    doc = frontmatter.parse(text)
    assert doc.meta["id"] == "hot-arcs-2026-11-29" and doc.meta["title"] == "Active Hot Arcs"  # upstream's id, dated
    assert doc.meta["priority"] == 10 and doc.meta["ttl"] == 3600 and doc.meta["severity"] == "info"
    assert doc.body.startswith("\n## Hot Arcs — 2026-11-29\n\n" + HOT_ARCS_HEADER)
    assert "brain_get_arc(cluster_id)" in doc.body and "brain_search_arcs(query)" in doc.body and "kb_search(query)" in doc.body
    entry = feed_file_entry("brain-feed/hot-arcs.md", text)
    assert (entry.id, entry.title, entry.priority) == ("hot-arcs-2026-11-29", "Active Hot Arcs", 10)


def test_global_feed_has_the_unchanged_shape() -> None:
    files = [
        (path, render_hot_arcs_file([], NOW) if path.endswith("hot-arcs.md") else f"---\nid: {ident}\ntitle: {title}\npriority: {prio}\n---\nbody\n")
        for path, (ident, title, prio, _ttl, _severity) in FEED_FILES.items()
    ]
    feed = global_feed(files, [_arc("arc-1", "t")], [], now=NOW, vault_root="/v")
    assert set(feed) == {"hot_arcs", "inject_blocks", "entries", "generated_at", "hash", "entry_count", "vault_root", "arcs", "blocks"}
    assert [e["id"] for e in feed["hot_arcs"]] == ["hot-arcs-2026-11-29"] and [e["id"] for e in feed["inject_blocks"]] == [
        "inject"
    ]  # upstream's buckets, by id
    assert feed["entry_count"] == len(feed["entries"]) + 2 == len(FEED_FILES)
    assert [a["cluster_id"] for a in feed["arcs"]] == ["arc-1"]  # structured records under a key of their own
    for entry in feed["hot_arcs"] + feed["inject_blocks"] + feed["entries"]:
        assert set(entry) == {"id", "title", "content", "priority", "ttl", "severity", "metadata"}
    priorities = [e["priority"] for e in feed["entries"]]
    assert priorities == sorted(priorities, reverse=True)
    again = global_feed(files, [_arc("arc-1", "t")], [], now=NOW + dt.timedelta(minutes=5), vault_root="/v")
    assert again["hash"] == feed["hash"]


# -- project feed -------------------------------------------------------------------


def _signal(name: str, project: str | None, repo: str | None, scope: str = "project") -> EntryRecord:
    path = f"amygdala/{name}.md"
    return EntryRecord(
        id=entry_id("signal", path),
        kind="signal",
        vault_path=path,
        title=name,
        content=f"content {name}",
        project=project,
        repo=repo,
        scope=scope,
        severity="alert",
        occurred_at=NOW,
    )


def test_project_feed_labels_every_entry_and_puts_own_signals_before_fleet_ones() -> None:
    ref = ProjectRef("api", "org1/api", True, NOW)
    lesson = EntryRecord(
        id="lesson:x#1",
        kind="lesson",
        vault_path="left/reference/lessons-2026-11-29.md",
        title="Use tokens",
        content="LESSONTOKEN",
        project="api",
        repo="org1/api",
        occurred_at=NOW,
    )
    memory = ProjectMemory(
        arcs=[_arc("arc-1", "ARCTOKEN work")],
        lessons=[lesson],
        project_signals=[_signal("own", "api", "org1/api")],
        fleet_signals=[_signal("fleet", None, None, "fleet")],
    )
    feed = project_feed(ref, memory, now=NOW, vault_root="/v", lesson_days=14, top_n=10)
    assert feed["scope"] == "project"
    assert feed["project"] == {"key": "api", "repo": "org1/api", "known": True, "last_active": "2026-11-29T12:00:00Z"}
    for entry in feed["hot_arcs"] + feed["inject_blocks"] + feed["entries"]:
        assert entry["metadata"]["scope"] in ("project", "fleet")
        assert "project" in entry["metadata"]
    ids = [e["id"] for e in feed["entries"]]
    assert ids.index("signal:amygdala/own.md") < ids.index("signal:amygdala/fleet.md")
    fleet = next(e for e in feed["entries"] if e["id"] == "signal:amygdala/fleet.md")
    assert fleet["metadata"]["scope"] == "fleet" and fleet["title"].startswith("Fleet signal")
    intent = next(e for e in feed["entries"] if e["id"] == "project-intent")
    assert intent["content"].startswith("Focus: ARCTOKEN work (active, last active 2026-11-29)")
    hot = next(e for e in feed["hot_arcs"] if e["title"] == "Active Hot Arcs")  # upstream's bucket, by id
    assert "ARCTOKEN" in hot["content"] and HOT_ARCS_HEADER in hot["content"]


def test_unknown_project_gets_known_false_a_short_entry_and_fleet_signals() -> None:
    feed = project_feed(
        ProjectRef("nope", None, False), ProjectMemory(fleet_signals=[_signal("f", None, None)]), now=NOW, vault_root="/v", lesson_days=14, top_n=10, ref="nope"
    )
    assert feed["project"]["known"] is False
    assert [e["id"] for e in feed["entries"]] == ["project-memory", "signal:amygdala/f.md"]
    assert "No project memory yet" in feed["entries"][0]["content"]


def test_inject_blocks_reach_all_or_their_target_only() -> None:
    def block(name: str, target: str | None) -> EntryRecord:
        meta = f"target: {target}\n" if target else ""
        return inject_record(f"---\nid: {name}\ntitle: {name}\n{meta}---\nbody {name}\n", f"brain-feed/inject/{name}.md")

    blocks = [block("everyone", None), block("slug", "org1/api"), block("other", "org2/api"), block("bykey", "api")]
    feed = project_feed(
        ProjectRef("api", "org1/api", True), ProjectMemory(inject=blocks), now=NOW, vault_root="/v", lesson_days=14, top_n=10, key_is_unique=False
    )
    assert [b["id"] for b in feed["blocks"]] == ["slug", "everyone"]  # P's own first (ADR 0070)
    assert [b["scope"] for b in feed["blocks"]] == ["project", "fleet"]
    assert [e["id"] for e in feed["inject_blocks"]] == ["inject:slug", "inject:everyone"]  # the entries clients read
    unique = project_feed(
        ProjectRef("api", "org1/api", True), ProjectMemory(inject=blocks), now=NOW, vault_root="/v", lesson_days=14, top_n=10, key_is_unique=True
    )
    assert [b["id"] for b in unique["blocks"]] == ["bykey", "slug", "everyone"]


def test_membership_matches_by_slug_when_a_key_is_shared() -> None:
    lesson = lambda project, repo, projects=(): EntryRecord(id="l", kind="lesson", vault_path="x", project=project, repo=repo, projects=projects)  # noqa: E731
    assert belongs(lesson("api", "org1/api"), "api", "org1/api", key_is_unique=False)
    assert not belongs(lesson("api", "org2/api"), "api", "org1/api", key_is_unique=False)
    assert not belongs(lesson("api", None), "api", "org1/api", key_is_unique=False)
    assert belongs(lesson("api", None), "api", "org1/api", key_is_unique=True)
    assert belongs(lesson("web", "org2/web", ("api",)), "api", "org1/api", key_is_unique=True)
    assert not belongs(lesson("web", "org2/web", ("api",)), "api", "org1/api", key_is_unique=False)
    assert not belongs(lesson(None, None), "api", None, key_is_unique=True)


def test_intent_files_round_trip_to_index_records() -> None:
    ref = ProjectRef("api", "org1/api", True, NOW)
    text = render_project_intent_file(ref, "Ship it. Then rest.", "Focus: x", NOW, source="derived")
    record = intent_record(text, "brain-feed/projects/org1/api/intent.md")
    assert (record.kind, record.project, record.repo, record.scope, record.content) == ("intent", "api", "org1/api", "project", "Ship it. Then rest.")
    fleet = intent_record("---\nid: operator-intent\n---\nAll hands.\n", "brain-feed/intent.md")
    assert fleet.scope == "fleet" and fleet.project is None


def test_vault_paths_map_to_entry_kinds() -> None:
    assert kind_of_path("clusters/2026-11-28/arc-1.md") == "arc"
    assert kind_of_path("clusters/2026-11-28/arc-1.merged.md") == "arc"  # arc_record_of returns None for it
    assert kind_of_path("left/reference/lessons-2026-11-28.md") == "lesson"
    assert kind_of_path("left/decisions/ADR-0001-x.md") == "decision"
    assert kind_of_path("amygdala/20261128-120000-alert-x.md") == "signal"
    assert kind_of_path("left/projects/api/BLOCKS.md") == "milestone"
    assert kind_of_path("daily/2026-11-28.md") == "milestone"
    assert kind_of_path("brain-feed/projects/org1/api/intent.md") == "intent"
    assert kind_of_path("brain-feed/inject/x.md") == "inject"
    assert kind_of_path("brain-feed/hot-arcs.md") is None
    assert kind_of_path("raw/inbox/x.md") is None


def test_project_activity_folds_bare_keys_into_a_unique_repo_only() -> None:
    def rec(project: str, repo: str | None, hours: int, projects: tuple[str, ...] = ()) -> EntryRecord:
        return EntryRecord(
            id=f"{project}{repo}{hours}",
            kind="lesson",
            vault_path="x",
            project=project,
            repo=repo,
            projects=projects,
            occurred_at=NOW - dt.timedelta(hours=hours),
        )

    found = project_activity(
        [rec("web", "org/web", 5), rec("web", None, 1), rec("api", "org1/api", 3), rec("api", "org2/api", 4), rec("api", None, 0), rec("solo", None, 2)]
    )
    assert [(p.key, p.repo, p.last_active) for p in found] == [
        ("api", "org1/api", NOW - dt.timedelta(hours=3)),
        ("api", "org2/api", NOW - dt.timedelta(hours=4)),
        ("solo", None, NOW - dt.timedelta(hours=2)),
        ("web", "org/web", NOW - dt.timedelta(hours=1)),
    ]


# -- stored answers -------------------------------------------------------------


def _lesson(days_ago: float, project: str = "api") -> EntryRecord:
    path = "left/reference/lessons-x.md"
    return EntryRecord(
        id=entry_id("lesson", path, str(days_ago)), kind="lesson", vault_path=path, projects=(project,), occurred_at=NOW - dt.timedelta(days=days_ago)
    )


def test_an_answer_stays_valid_until_its_oldest_windowed_row_leaves_the_window() -> None:
    memory = ProjectMemory(arcs=[_arc("a1", "Old arc")], lessons=[_lesson(1), _lesson(9)], fleet_signals=[_signal("s", None, None, "fleet")])
    signal_time = memory.fleet_signals[0].occurred_at
    oldest = min(NOW - dt.timedelta(days=9), signal_time)
    assert memory.valid_until(14) == oldest + dt.timedelta(days=14)
    # Hot arcs and intents do not move with the clock: with no windowed row, only a write changes the answer.
    assert ProjectMemory(arcs=[_arc("a1", "Old arc")]).valid_until(14) is None


def test_a_stored_answer_is_the_payload_with_generated_at_restamped() -> None:
    memory = ProjectMemory(arcs=[_arc("a1", "Ship the parser")], lessons=[_lesson(1)])
    payload = project_feed(ProjectRef("api", "org1/api", True, NOW), memory, now=NOW, vault_root="/v", lesson_days=14, top_n=10)
    body = answer_body(payload)
    assert "generated_at" not in json.loads(body)
    later = NOW + dt.timedelta(hours=3)
    served = json.loads(stamp_answer(body, later))
    assert served == payload | {"generated_at": "2026-11-29T15:00:00Z"}
    assert list(served) == list(payload)  # same key order: generated_at stays last
    assert json.loads(stamp_answer("{}", later)) == {"generated_at": "2026-11-29T15:00:00Z"}


def test_global_feed_reads_feed_files_as_upstream_does() -> None:
    """UPSTREAM.md 1.4: skipped files, defaults only for absent keys, one bucket per id, upstream's hash."""
    import hashlib

    files = [
        ("brain-feed/README.md", "# The feed folder\n\nNo frontmatter: skipped.\n"),
        ("brain-feed/empty.md", "---\nid: empty\n---\n\n   \n"),
        ("brain-feed/bare.md", "---\n---\nbody of a file with empty frontmatter\n"),
        ("brain-feed/hot-arcs.md", "---\nid: hot-arcs-2026-11-29\ntitle: Active Hot Arcs\npriority: 10\n---\n| Arc ID | Heat |\n"),
        ("brain-feed/inject.md", "---\nid: inject\ntitle: Brain Inject\npriority: nine\n---\n**[all]** be kind\n"),
        ("brain-feed/shot.md", "---\ntitle: Screenshot\nttl: 60\n---\nnot a hot arcs entry\n"),
        ("brain-feed/blank.md", "---\nid: ''\ntitle:\nseverity:\n---\npresent but empty keys\n"),
    ]
    feed = global_feed(files, [], [], now=NOW, vault_root="/v")
    assert [e["id"] for e in feed["hot_arcs"]] == ["hot-arcs-2026-11-29"]
    assert [(e["id"], e["priority"]) for e in feed["inject_blocks"]] == [("inject", 5)]  # unparseable priority: 5
    rest = {e["id"]: e for e in feed["entries"]}
    assert set(rest) == {"shot", ""}  # the stem when id is absent; "" when present but empty
    assert (rest["shot"]["title"], rest["shot"]["ttl"], rest["shot"]["severity"]) == ("Screenshot", 60, "info")
    assert (rest[""]["title"], rest[""]["severity"]) == ("", "")
    assert rest["shot"]["metadata"]["ttl"] == "60"  # the frontmatter, as text
    assert feed["entry_count"] == 4
    ordered = sorted([*feed["hot_arcs"], *feed["inject_blocks"], *feed["entries"]], key=lambda e: -e["priority"])
    expected = hashlib.sha256("|".join(f"{e['id']}:{e['priority']}:{e['content'][:32]}" for e in ordered).encode()).hexdigest()[:16]
    assert feed["hash"] == expected


def test_storable_replaces_nuls_and_lone_surrogates_wherever_they_are() -> None:
    """A NUL or a lone surrogate becomes U+FFFD in ASCII and other text, keys and nested values; every other string is
    the same object (its fast tests: ``in``, ``isascii``, a strict encode)."""
    for clean in ("plain", "", "é😀 – ok", "\ud7ff\ue000"):
        assert storable(clean) is clean
    assert storable("a\x00b") == "a\ufffdb"
    assert storable("é\ud800x\udfff") == "é\ufffdx\ufffd" and storable("\ud83d") == "\ufffd"
    assert storable("\x00é") == "\ufffdé"
    assert storable({"k\x00": ["x", ("é\udfff", 3)], "n": None}) == {"k\ufffd": ["x", ("é\ufffd", 3)], "n": None}
    for text in ("plain", "", "é😀", "\ud7ff\ue000", "\ud800", "a\udfff", "é\udbff😀", "\x00"):
        assert has_lone_surrogate_char(text) == any("\ud800" <= c <= "\udfff" for c in text), repr(text)
