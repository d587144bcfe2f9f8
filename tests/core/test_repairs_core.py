"""The repairs of upstream-damaged vault text (``brain_core.vault.repairs``): each finds its damage, keeps every other byte, and finds nothing the second time."""

from __future__ import annotations

from brain_core.vault import frontmatter
from brain_core.vault.inline import parse_markers
from brain_core.vault.repairs import (
    CHAIN,
    EDGE,
    MERGED_SECTION,
    SIGNAL,
    TITLE,
    clean_title,
    cleaned_title,
    dedupe_edges,
    drop_repeated_merges,
    merge_chains,
    repair_arc,
    requote_signals,
)

RATIONALE = "Auth flow rework — merged because both arcs touch the login path, share two sessions; and the fix landed in one PR together"


def test_a_title_loses_the_merge_rationale_and_its_backticks() -> None:
    assert cleaned_title(RATIONALE) == "Auth flow rework"
    assert cleaned_title("`deploy` pipeline") == "deploy pipeline"
    assert cleaned_title("Fix flaky test — short note, kept") is None  # fewer than 12 words after the dash
    assert cleaned_title("Plain title") is None
    assert cleaned_title("``") is None  # never blanked


def test_a_title_repair_changes_the_title_line_only() -> None:
    text = f'---\ncluster_id: a\ntitle: "{RATIONALE}"\nheat: 5\n---\n# body\r\nkept\n'
    done = clean_title(text)
    assert done is not None and done.fixes[0].what == TITLE and done.fixes[0].after == "Auth flow rework"
    assert frontmatter.parse(done.text).meta["title"] == "Auth flow rework"
    assert done.text.replace("title: Auth flow rework", f'title: "{RATIONALE}"') == text
    assert clean_title(done.text) is None


def test_edges_keep_one_per_target_the_strongest_and_no_self_loop() -> None:
    text = (
        "## Edges\n\n"
        "<!-- @edge type=related target=b -->\n"
        "<!-- @edge type=parent target=b -->\n"
        "<!-- @edge type=sibling target=c -->\n"
        "<!-- @edge type=sibling target=c -->\n"
        "<!-- @edge type=child target=a -->\n"
        "tail\n"
    )
    done = dedupe_edges(text, ["a"])
    assert done is not None
    kept = [(m.attrs["type"], m.attrs["target"]) for m in parse_markers(done.text) if m.type == "edge"]
    assert kept == [("parent", "b"), ("sibling", "c")]
    assert done.text == "## Edges\n\n<!-- @edge type=parent target=b -->\n<!-- @edge type=sibling target=c -->\ntail\n"
    assert [f.what for f in done.fixes] == [EDGE] * 3
    assert dedupe_edges(done.text, ["a"]) is None


def test_a_repeated_merged_from_section_goes() -> None:
    text = "# A\n\n## Merged from b\n\nfirst\n\n## Merged from c\n\nother\n\n## Merged from b\n\nagain\n"
    done = drop_repeated_merges(text)
    assert done is not None and done.fixes[0].what == MERGED_SECTION
    assert done.text == "# A\n\n## Merged from b\n\nfirst\n\n## Merged from c\n\nother\n\n"
    assert drop_repeated_merges(done.text) is None


def test_a_repeated_merged_section_goes_but_never_a_section_written_after_it() -> None:
    kept = "## Edges\n<!-- @edge type=parent target=x -->\n\n## Source sessions\n- home-bridge://sessions/s1\n"
    text = "# A\n\n## Merged from X\n\nold text\n\n## Merged from X\n\nold text\n\n" + kept
    done = drop_repeated_merges(text)
    assert done is not None and done.text == "# A\n\n## Merged from X\n\nold text\n\n" + kept
    # B's body with headings of its own repeats whole; a repeat that differs (markers already there were
    # left out) ends at the first heading B's body does not hold.
    body = "\n\n## Sessions\n| s1 |\n\nnotes\n\n"
    assert drop_repeated_merges(f"# A\n\n## Merged from b{body}## Merged from b{body}{kept}").text == f"# A\n\n## Merged from b{body}{kept}"  # type: ignore[union-attr]
    shorter = "\n\n## Sessions\n| s1 |\n\n"
    assert drop_repeated_merges(f"# A\n\n## Merged from b{body}## Merged from b{shorter}{kept}").text == f"# A\n\n## Merged from b{body}{kept}"  # type: ignore[union-attr]


def test_a_signal_that_lost_its_quoting_parses_again() -> None:
    text = "x\n<!-- @signal severity=resolved source=disk-full verify=test -d /var/log -->\n(CLEARED: ok) disk\n<!-- @/signal -->\n"
    assert not [m for m in parse_markers(text) if m.type == "signal"]
    done = requote_signals(text)
    assert done is not None and done.fixes[0].what == SIGNAL
    signals = [m for m in parse_markers(done.text) if m.type == "signal"]
    assert signals and signals[0].attrs == {"severity": "resolved", "source": "disk-full", "verify": "test -d /var/log"}
    assert requote_signals(done.text) is None
    assert requote_signals('<!-- @signal severity=info source="two words" -->') is None


def test_repair_arc_composes_and_reports_each_change() -> None:
    text = f'---\ntitle: "`{RATIONALE}`"\n---\n<!-- @edge type=related target=b -->\n<!-- @edge type=related target=b -->\n'
    done = repair_arc(text, ["a"])
    assert done is not None and [f.what for f in done.fixes] == [TITLE, EDGE]
    assert repair_arc(done.text, ["a"]) is None


def test_a_chain_keeps_the_longest_text_under_the_one_tombstone_name() -> None:
    sizes = {
        "clusters/d/x.md": 500,
        "clusters/d/x.merged.md": 100,
        "clusters/d/x.merged.merged.md": 300,
        "clusters/d/y.merged.md": 50,  # one level: a tombstone, not a chain
    }
    (chain,) = merge_chains(sizes)
    assert chain.target == "clusters/d/x.merged.md"
    assert chain.keep == "clusters/d/x.merged.merged.md" and chain.drop == ("clusters/d/x.merged.merged.md",)
    assert merge_chains({"clusters/d/x.merged.md": 1, "clusters/d/x.md": 2}) == []
    assert CHAIN == "merge-chain"
