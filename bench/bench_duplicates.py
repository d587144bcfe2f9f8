"""Benchmark: the near-duplicate threshold for lessons, measured on the retrieval evaluation's corpus (ADR 0048).

Two lessons of one project are collapsed into one feed line when their
vectors' cosine reaches a threshold. Too low merges different lessons that
share words (the corpus's near misses: a token of an auth session against an
LLM token budget); too high leaves rewordings apart. Measured with the
shipped offline embedder on the corpus of ``bench.retrieval_corpus``:

- restatements: every pair of entries one topic instance wrote in a project
  (the lesson and the arc that found it, the decision and the milestone that
  shipped it): one fact in other words and another form;
- different facts: every pair of entries of one project about different
  topics (near misses included).

The corpus's projects are split in two by a hash of their name: the
threshold is chosen on the first half (the lowest that merges no pair of
different lessons there, plus a margin) and reported on the second.

Run: .venv/bin/python -m bench.bench_duplicates
"""

from __future__ import annotations

import hashlib
import itertools
import json
import time

import numpy as np

from bench.retrieval_corpus import build
from brain_kernel.search.embedders import OfflineEmbedder

MARGIN = 0.05  # above the highest pair of different facts seen while choosing


def _half(project: str) -> str:
    return "held" if hashlib.sha256(project.encode()).digest()[0] % 2 else "tune"


def main() -> int:
    entries, _ = build()
    facts = [e for e in entries if e.topic]  # entries written by a topic instance (noise has none)
    embedder = OfflineEmbedder()
    started = time.perf_counter()
    vectors = np.asarray(embedder.embed([e.text for e in facts]), dtype=np.float64)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    took = time.perf_counter() - started
    same: dict[str, list[float]] = {"tune": [], "held": []}
    different: dict[str, list[float]] = {"tune": [], "held": []}
    by_project: dict[str, list[int]] = {}
    for n, e in enumerate(facts):
        by_project.setdefault(e.project, []).append(n)
    for project, members in by_project.items():
        for a, b in itertools.combinations(members, 2):
            cosine = float(vectors[a] @ vectors[b])
            (same if facts[a].topic == facts[b].topic else different)[_half(project)].append(cosine)
    threshold = round(max(different["tune"]) + MARGIN, 2)

    def rate(values: list[float], above: bool) -> float:
        hits = sum(1 for v in values if (v >= threshold) == above)
        return round(hits / len(values), 5) if values else 0.0

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
    }
    print(json.dumps(figures))
    print(
        f"threshold {threshold}: held half merges {figures['false_merges']['held']:.2%} of {len(different['held'])} pairs of different facts "
        f"and {figures['restatements_merged']['held']:.1%} of {len(same['held'])} restatements of one fact"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
