"""Benchmark: when two lessons of a project are one feed line (ADR 0048, ADR 0065).

Two lessons of one project are collapsed into one feed line when their
vectors' cosine reaches a threshold, they name the same identifiers, and
neither is the other with a word changed (``brain_core.feed.repeats``). Too
low a threshold merges different lessons that share words (the corpus's near
misses: a token of an auth session against an LLM token budget); too high
leaves rewordings apart. Measured with the shipped offline embedder on:

- the retrieval evaluation's corpus (``bench.retrieval_corpus``):
  restatements, every pair of entries one topic instance wrote in a project
  (the lesson and the arc that found it: one fact in other words and another
  form), and different facts, every pair of entries of one project about
  different topics (near misses included). The projects are split in two by
  a hash of their name: the threshold is chosen on the first half (the
  lowest that merges no pair of different lessons there, plus a margin) and
  reported on the second;
- the duplicates corpus (``bench.duplicates_corpus``): minimal pairs, one
  sentence saying two different facts by one changed word, number or
  negation (and, apart, pairs that swap two words or change two), and
  rewordings, groups of one lesson written again in other words.

Each pair is judged by the rule as it stood before ADR 0065 (same text, or
near and the same identifiers) and by the rule today (``repeat_of``).

Run: .venv/bin/python -m bench.bench_duplicates
"""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
import json
import re
import time

import numpy as np

from bench.duplicates_corpus import MINIMAL_PAIRS, REWORDINGS
from bench.retrieval_corpus import build
from brain_core.entries import EntryRecord
from brain_core.feed.repeats import NEAR_DUPLICATE, content_words, edited, normalised, repeat_of
from brain_kernel.search.embedders import OfflineEmbedder

MARGIN = 0.05  # above the highest pair of different facts seen while choosing
ONE_CHANGE = ("substituted", "number", "negation", "added")  # the minimal pairs; "swapped" and "two changes" are reported apart
_NOW = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
# the identifiers rule before ADR 0065, which read numbers in digits only
_TOKEN = re.compile(r"\w+(?:[./:\-]+\w+)*")
_CODE = re.compile(r"\w[_./:]\w|[a-z][A-Z]|\d")


def _named_before(record: EntryRecord) -> frozenset[str]:
    return frozenset(t.lower() for t in _TOKEN.findall(f"{record.title} {record.content}") if _CODE.search(t))


def _half(project: str) -> str:
    return "held" if hashlib.sha256(project.encode()).digest()[0] % 2 else "tune"


def _lesson(n: int, text: str) -> EntryRecord:
    return EntryRecord(id=f"lesson:{n}", kind="lesson", vault_path=f"reference/lessons-{n}.md", content=text, occurred_at=_NOW - dt.timedelta(hours=n))


class _Judge:
    """Both rules over texts whose vectors are embedded once."""

    def __init__(self, embedder: OfflineEmbedder, texts: list[str]) -> None:
        unique = sorted(set(texts))
        vectors = np.asarray(embedder.embed(unique), dtype=np.float64)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        self.vectors = dict(zip(unique, vectors, strict=True))

    def cosine(self, a: str, b: str) -> float:
        return float(self.vectors[a] @ self.vectors[b])

    def lines(self, texts: tuple[str, ...] | list[str], *, today: bool = True) -> int:
        """How many feed lines ``texts`` (newest first) make under today's rule, or the rule before ADR 0065."""
        records = [_lesson(n, t) for n, t in enumerate(texts)]
        near = [(a.id, b.id) for a, b in itertools.combinations(records, 2) if self.cosine(a.content, b.content) >= NEAR_DUPLICATE]
        if today:
            return len(records) - len(repeat_of(records, near))
        groups = {r.id: r.id for r in records}  # before: same text, or near and naming the same identifiers, transitively
        by_id = {r.id: r for r in records}
        joined = [(a.id, b.id) for a, b in itertools.combinations(records, 2) if normalised(a) == normalised(b)]
        joined += [(a, b) for a, b in near if _named_before(by_id[a]) == _named_before(by_id[b])]
        for a, b in joined:
            ga, gb = groups[a], groups[b]
            groups = {k: (ga if g == gb else g) for k, g in groups.items()}
        return len(set(groups.values()))

    def folds(self, a: str, b: str, *, today: bool = True) -> bool:
        return self.lines((a, b), today=today) == 1


def main() -> int:
    entries, _ = build()
    facts = [e for e in entries if e.topic]  # entries written by a topic instance (noise has none)
    embedder = OfflineEmbedder()
    started = time.perf_counter()
    pair_texts = [t for _, a, b in MINIMAL_PAIRS for t in (a, b)] + [t for group in REWORDINGS for t in group]
    judge = _Judge(embedder, [e.text for e in facts] + pair_texts)
    took = time.perf_counter() - started
    same: dict[str, list[float]] = {"tune": [], "held": []}
    different: dict[str, list[float]] = {"tune": [], "held": []}
    folded = {"before": {"same": 0, "different": 0}, "today": {"same": 0, "different": 0}}
    near_edited = {"same": 0, "different": 0}  # near pairs one edit apart, whatever they name (dates keep the corpus's apart)
    by_project: dict[str, list[int]] = {}
    for n, e in enumerate(facts):
        by_project.setdefault(e.project, []).append(n)
    for project, members in by_project.items():
        for a, b in itertools.combinations(members, 2):
            cosine = judge.cosine(facts[a].text, facts[b].text)
            which = "same" if facts[a].topic == facts[b].topic else "different"
            (same if which == "same" else different)[_half(project)].append(cosine)
            if cosine >= NEAR_DUPLICATE:  # below it neither rule folds a pair of different texts
                near_edited[which] += edited(content_words(facts[a].text), content_words(facts[b].text))
                for rule in ("before", "today"):
                    folded[rule][which] += judge.folds(facts[a].text, facts[b].text, today=rule == "today")
    threshold = round(max(different["tune"]) + MARGIN, 2)

    def rate(values: list[float], above: bool) -> float:
        hits = sum(1 for v in values if (v >= threshold) == above)
        return round(hits / len(values), 5) if values else 0.0

    minimal: dict[str, dict[str, int]] = {}
    for kind, a, b in MINIMAL_PAIRS:
        row = minimal.setdefault(kind, {"pairs": 0, "near": 0, "folded_before": 0, "folded_today": 0})
        row["pairs"] += 1
        row["near"] += judge.cosine(a, b) >= NEAR_DUPLICATE
        row["folded_before"] += judge.folds(a, b, today=False)
        row["folded_today"] += judge.folds(a, b)
    reworded = [(a, b) for group in REWORDINGS for a, b in itertools.combinations(group, 2)]
    # a minimal pair whose one fact is also written in other words: the other fact must not hide in that group
    among = [(b if a in group else a, group) for _, a, b in MINIMAL_PAIRS for group in REWORDINGS if a in group or b in group]
    feeds = [(feed, group) for other, group in among for feed in ((other, *group), (*group, other))]
    figures = {
        "model": embedder.name,
        "entries": len(facts),
        "embed_seconds": round(took, 1),
        "threshold": threshold,
        "different_pairs": {h: len(v) for h, v in different.items()},
        "restatement_pairs": {h: len(v) for h, v in same.items()},
        "max_different": {h: round(max(v), 3) for h, v in different.items() if v},
        "p99_different": {h: round(float(np.percentile(v, 99)), 3) for h, v in different.items() if v},
        "median_restatement": {h: round(float(np.median(v)), 3) for h, v in same.items() if v},
        "false_merges": {h: rate(v, True) for h, v in different.items()},
        "restatements_merged": {h: rate(v, True) for h, v in same.items()},
        "corpus_folded": folded,
        "minimal_pairs": minimal,
        "rewording_pairs": len(reworded),
        "rewording_pairs_near": sum(judge.cosine(a, b) >= NEAR_DUPLICATE for a, b in reworded),
        "rewording_pairs_folded": {rule: sum(judge.folds(a, b, today=rule == "today") for a, b in reworded) for rule in ("before", "today")},
        "near_edited": near_edited,
        "pair_among_rewordings": len(feeds),
        "pair_among_rewordings_hidden": {
            rule: sum(judge.lines(feed, today=rule == "today") < judge.lines(group, today=rule == "today") + 1 for feed, group in feeds)
            for rule in ("before", "today")
        },
        "rewording_group_lines": {rule: [judge.lines(group, today=rule == "today") for group in REWORDINGS] for rule in ("before", "today")},
    }
    print(json.dumps(figures))
    one_change = [row for kind, row in minimal.items() if kind in ONE_CHANGE]
    print(
        f"threshold {threshold}: held half merges {figures['false_merges']['held']:.2%} of {len(different['held'])} pairs of different facts "
        f"and {figures['restatements_merged']['held']:.1%} of {len(same['held'])} restatements of one fact"
    )
    for rule in ("before", "today"):
        print(
            f"{rule}: {sum(r[f'folded_{rule}'] for r in one_change)} of {sum(r['pairs'] for r in one_change)} minimal pairs fold, "
            f"{folded[rule]['different']} of {sum(map(len, different.values()))} corpus pairs of different facts, "
            f"{folded[rule]['same']} of {sum(map(len, same.values()))} restatements, "
            f"{figures['rewording_pairs_folded'][rule]} of {len(reworded)} rewording pairs; "
            f"rewording groups show {figures['rewording_group_lines'][rule]} lines; "
            f"a minimal pair among rewordings hides its other fact in {figures['pair_among_rewordings_hidden'][rule]} of {len(feeds)} feeds"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
