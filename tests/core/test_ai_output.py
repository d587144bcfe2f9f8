"""The pure core of the LLM tick: the AI answer parser, merge titles, the vault edits, the prompt and the secret scrub."""

from __future__ import annotations

from pathlib import Path

import pytest

from brain_core.ai_output import merge_title, parse_ai_output
from brain_core.redact import REDACTED, scrub
from brain_core.tick_prompt import MAX_ARCS, PromptArc, PromptInputs, build_prompt, previous_intent
from brain_core.vault import frontmatter
from brain_core.vault.ai_edits import add_edge, add_summary, merge_arcs, set_signal

DATA = Path(__file__).parent.parent / "data" / "ai_output"


def test_bullets_backticks_and_both_arrows_parse_to_every_section() -> None:
    out = parse_ai_output((DATA / "bullets_and_arrows.md").read_text())
    assert out.sections == [1, 2, 3, 4, 5, 6]
    assert {(e.source, e.type, e.target) for e in out.edges} == {
        ("{C}", "parent", "{A}"),
        ("{D}", "sibling", "{A}"),
        ("{A}", "unblocks", "2026-01-01-no-such-arc-000000000000"),
    }
    assert [r["reason"] for r in out.refused] == ["self-loop"]
    assert [(m.a, m.b, m.title) for m in out.merges] == [("{A}", "{B}", "Hook relay for rigs")]
    assert [(s.arc, s.detail) for s in out.splits] == [("{C}", "the sessions cover two unrelated topics")]
    assert [(s.action, s.source, s.severity, s.reason) for s in out.signals] == [
        ("escalate", "disk-full", "critical", "the disk is at 97%"),
        ("clear", "stale-cache", None, "fixed by the cache flush"),
    ]
    assert out.intent == "The operator is wiring agent hooks into the rig fleet. Next comes the release."
    assert set(out.project_intents) == {"agentihooks", "the-cloud-clockwork/openrig", "nobody/unknown"}
    assert (out.health.score, out.health.reason) == (7, "healthy, one stale signal")
    assert [a for a, _ in out.summaries] == ["{D}", "{A}"]


def test_exact_upstream_lines_still_parse_and_a_paragraph_is_the_fleet_intent() -> None:
    out = parse_ai_output((DATA / "upstream_exact.md").read_text())
    assert [(e.type, e.reason) for e in out.edges] == [("related", "both touch the test harness")]
    assert out.merges[0].title == "Test harness"
    assert out.intent == "The operator is consolidating test tooling across agentihooks and openrig. The rig runner comes next."
    assert out.project_intents == {} and out.health.score == 6


def test_a_signal_directive_wrapped_whole_in_backticks_parses_with_a_quoted_source_inside() -> None:
    bt = "`"
    text = (
        "### 3. Signal Escalation\n"
        f"{bt}ESCALATE: {bt}db down{bt} → critical (prod){bt}\n"
        f"- {bt}CLEAR: {bt}two words{bt} (ok){bt}\n"
        f"{bt}ESCALATE: disk → warning (y){bt}.\n"
    )
    out = parse_ai_output(text)
    assert [(s.action, s.source, s.severity, s.reason) for s in out.signals] == [
        ("escalate", "db down", "critical", "prod"),
        ("clear", "two words", None, "ok"),
        ("escalate", "disk", "warning", "y"),
    ]
    assert out.unparsed == []


def test_missing_health_is_unparseable_and_text_before_section_one_is_ignored() -> None:
    out = parse_ai_output("MERGE: a + b → ignored\n### 1. Missing Edges\n`a --child-> b`\n")
    assert out.merges == [] and [(e.type, e.target) for e in out.edges] == [("child", "b")]
    assert (out.health.score, out.health.reason) == (0, "unparseable")


def test_a_merge_title_is_a_name_never_the_rationale() -> None:
    assert merge_title("`Hook relay` — both arcs wire the relay") == "Hook relay"
    assert merge_title('"Checkout: unified flow" -- same code path') == "Checkout: unified flow"
    assert merge_title("Relay work (the second arc continues the first)") == "Relay work"
    assert merge_title("Relay work; merged because they overlap") == "Relay work"
    assert len(merge_title("word " * 40) or "") <= 80
    assert merge_title("") is None and merge_title(None) is None


def test_edges_and_summaries_are_added_once() -> None:
    text = "---\ncluster_id: a\ntitle: A\n---\n# A\n"
    once = add_edge(text, "parent", "b")
    assert once is not None and "## Edges\n\n<!-- @edge type=parent target=b -->" in once
    assert add_edge(once, "sibling", "b") is None  # any edge to the target is kept
    twice = add_edge(once, "child", "c")
    assert twice is not None and twice.count("## Edges") == 1 and twice.index("target=b") < twice.index("target=c")
    summed = add_summary(text, "Does A.")
    assert summed is not None and frontmatter.parse(summed).meta["synthesized"] is True and add_summary(summed, "Other.") is None


def test_signals_match_their_source_exactly_and_keep_their_attributes() -> None:
    text = (
        '<!-- @signal severity=warning source=disk-full verify="df -h" -->\nDisk\n<!-- @/signal -->\n<!-- @signal source=disk -->\nOther\n<!-- @/signal -->\n'
    )
    escalated, n = set_signal(text, "disk-full", severity="critical") or ("", 0)
    assert n == 1 and '<!-- @signal severity=critical source=disk-full verify="df -h" -->' in escalated and "<!-- @signal source=disk -->" in escalated
    cleared, _ = set_signal(escalated, "disk", severity="resolved", reason="gone") or ("", 0)
    assert "<!-- @signal severity=resolved source=disk -->\nOther (CLEARED: gone)\n" in cleared
    assert set_signal(cleared, "disk", severity="resolved", reason="gone") is None  # a second clear changes nothing
    assert set_signal(text, "disk-ful", severity="critical") is None


def test_a_merge_keeps_both_projects_and_drops_duplicate_markers() -> None:
    a = frontmatter.render(
        {"cluster_id": "a", "title": "A", "project": "api", "projects": ["api"], "repo": "o/api", "source_sessions": ["s1"]},
        "\n# A\n<!-- @lesson -->\nSame\n<!-- @/lesson -->\n",
    )
    b = frontmatter.render(
        {"cluster_id": "b", "title": "B", "project": "web", "projects": ["web"], "repo": "o/web", "worktrees": ["wt"], "source_sessions": ["s2"]},
        "\n# B\n<!-- @lesson -->\nsame\n<!-- @/lesson -->\n<!-- @edge type=child target=z -->\nOwn text\n",
    )
    merged = merge_arcs(a, b, a_id="a", b_id="b", title="AB")
    assert merged is not None
    meta, body = frontmatter.parse(merged.survivor).meta, frontmatter.parse(merged.survivor).body
    assert (meta["project"], meta["projects"], meta["repo"], meta["repos"]) == ("api", ["api", "web"], "o/api", ["o/api", "o/web"])
    assert (meta["worktrees"], meta["source_sessions"], meta["merged_from"], meta["title"]) == (["wt"], ["s1", "s2"], ["b"], "AB")
    assert body.count("<!-- @lesson -->") == 1 and "target=z" not in body and "## Merged from b\n\nOwn text" in body
    assert frontmatter.parse(merged.tombstone).meta["merged_into"] == "a"
    assert merge_arcs(merged.survivor, b, a_id="a", b_id="b", title="AB") is None


def test_scrub_replaces_tokens_and_credential_values() -> None:
    text = "key sk-ant-api03-abcdefghijklmnopqrstuv and ghp_abcdefghijklmnopqrstuvwxyz0123 AKIAABCDEFGHIJKLMNOP\nDB_PASSWORD=hunter2hunter2hunter2\nAuthorization: Bearer abcdefghijklmnopqrstuvwxyz.123"
    out = scrub(text)
    assert out.count(REDACTED) == 5 and "DB_PASSWORD=" + REDACTED in out and "Bearer " + REDACTED in out
    assert scrub("a short token=abc and sk-short") == "a short token=abc and sk-short"


@pytest.mark.parametrize(
    ("said", "kept"),
    [
        ("redis://:Sup3rS3cretRedisPw@cache:6379/0", "redis://:<REDACTED_SECRET>@cache:6379/0"),  # no user
        ("HTTPS://deploy:pw12345@git.example.com/x", "HTTPS://deploy:<REDACTED_SECRET>@git.example.com/x"),
        ("postgres://app:p@ssw0rd!xyz@db:5432/app", "postgres://app:<REDACTED_SECRET>@db:5432/app"),  # '@' in it
        ('{"password": "hunter2hunter2x"}', '{"password": "<REDACTED_SECRET>"}'),
        ("DB_PASSWORD=Tr0ub4dor&3horse!battery now", "DB_PASSWORD=<REDACTED_SECRET> now"),
        ('PGPASSWORD="hunter2 hunter2"', 'PGPASSWORD="<REDACTED_SECRET>"'),
        ("https://h/p?a=1&password=secret123&b=2", "https://h/p?a=1&password=<REDACTED_SECRET>&b=2"),
        ("-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQOYBF\n-----END PGP PRIVATE KEY BLOCK-----", "<REDACTED_SECRET>"),
        ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "<REDACTED_SECRET>"),
        ("npm_abcdefghijklmnopqrstuvwxyz0123456789 hf_abcdefghijklmnopqrstuvwxyz01234567", "<REDACTED_SECRET> <REDACTED_SECRET>"),
        ("ghr_abcdefghijklmnopqrstuvwxyz0123 sk_live_abcdefghijklmnop1234", "<REDACTED_SECRET> <REDACTED_SECRET>"),
        ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "Authorization: Basic <REDACTED_SECRET>"),
        ("X-Api-Key: abcdefghijklmnop12345", "X-Api-Key: <REDACTED_SECRET>"),
        ("password: required; see git@github.com:acme/api.git and http://host:8080/p", None),  # prose and addresses stay
        ("We need a basic configuration; Basic authentication is on; Vite at http://localhost:5173/@vite/client", None),
        ("https://cdn.jsdelivr.net:443/npm/react@18.2.0/x and https://registry.npmjs.org:443/@types/node", None),
        ("DB_PASSWORD=${DB_PASSWORD} POSTGRES_PASSWORD=${POSTGRES_PASSWORD:-postgres}", None),  # references, not values
        ("user_secret = db.get(key) and OLDPWD=/home/dev/work", None),  # code and a folder
    ],
)
def test_scrub_knows_the_shapes_secrets_leaked_in(said: str, kept: str | None) -> None:
    assert scrub(said) == (said if kept is None else kept)


def test_prompt_trims_the_arc_table_keeps_whole_sentences_and_scrubs() -> None:
    arcs = [
        PromptArc(f"arc-{i}", 10 - i / 100, "left-hemisphere", "active", f"Arc {i} ghp_abcdefghijklmnopqrstuvwxyz0123", "o/api, web", 1, 0) for i in range(300)
    ]
    long_intent = "## What the operator is likely doing (2026-11-29 12:00 UTC)\n\n" + " ".join(f"Sentence number {i} is here." for i in range(80))
    prompt = build_prompt(
        PromptInputs(arcs=arcs, arcs_total=300, edges=[("a", "related", "b"), ("a", "parent", "b")], previous_intent=previous_intent(long_intent))
    )
    assert f"| {MAX_ARCS} | arc-{MAX_ARCS - 1} |" in prompt and "(+50 more arcs, trimmed by heat)" in prompt
    assert "| o/api, web |" in prompt and "ghp_" not in prompt
    assert "  a --parent--> b" in prompt and "--related-->" not in prompt
    previous = prompt.split("## Previous Intent\n\n", 1)[1].split("\n\n", 1)[0]
    assert previous.endswith("is here.") and "What the operator" not in previous and len(previous) <= 700
    small = build_prompt(PromptInputs(arcs=arcs, arcs_total=300), max_chars=8000)
    assert "(arc table omitted: prompt over its size cap)" in small
