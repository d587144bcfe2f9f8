"""Retrieval evaluation: which offline model finds what sessions ask for (ADR 0047).

The corpus and queries come from ``bench.retrieval_corpus`` (seeded: 1,830
entries over 40 projects, 240 queries of five kinds, split into a tuning
half and a held-aside half by a hash of each query's id). For each model the
entries are embedded and stored with the kernel's own ``store_docs`` in a
fresh Postgres, and every query is asked through the kernel's own
``search`` scoped to its project, as ``POST /search`` and the hook's prompt
recall ask it, in each mode: ``vector`` (the model alone), ``words``
(Postgres full text, the same for every model) and ``hybrid`` (the
kernel's reciprocal rank fusion of both). ``rrf words xW`` rows fuse the
kernel's vector and words rankings here with the word side weighted by W,
to measure the fusion itself (1.0 is plain RRF over 50 candidates a side).

Per model, mode, half and query kind it prints recall@5 (the share of a
query's relevant entries in the top 5, averaged) and MRR@10 (1 / rank of
the first relevant entry, 0 past 10); per model the time to embed one
query in-process (p50/p95 over every query, after a warm-up), the load time
and the model's size on disk.

Models are given as ``--model LABEL=FOLDER``: a model2vec folder
(``model.safetensors``) or an ONNX one (``model.onnx``). Without any, the
shipped model is evaluated alone. ``build_offline_embedder.py --variant``
makes the candidates (see its docstring).

Run: .venv/bin/python -m bench.eval_retrieval --model today=DIR --model onnx=DIR [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from alembic import command
from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session

from bench.common import fresh_database, pct
from bench.retrieval_corpus import QUERY_KINDS, Entry, Query, build
from brain_core.chunks import EmbeddingDoc
from brain_kernel.search import embeddings
from brain_kernel.search.embedders import OFFLINE_MODEL_DIR, Embedder, OfflineEmbedder
from brain_migrations.runner import alembic_config

K_RECALL = 5
K_MRR = 10
RRF_K = 60  # the constant of reciprocal rank fusion, as its paper and most peers use it
FUSE_DEPTH = 50  # candidates each side brings to the in-bench fusion
# Weights of the word side tried in the in-bench fusion (1.0 is the kernel's plain RRF, over 50 candidates a side).
WORDS_WEIGHTS = (1.0, 0.5, 0.25)


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.iterdir() if p.is_file() and p.name != "README.md")


class StaticEmbedder:
    """A model2vec static model from a local folder: the kind the kernel shipped before ADR 0047, for comparison."""

    def __init__(self, folder: Path, name: str, dim: int) -> None:
        from model2vec import StaticModel

        self.model = StaticModel.from_pretrained(folder, force_download=False)
        self.name, self.dim = name, dim

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        import numpy as np

        vectors = np.asarray(self.model.encode(list(texts), normalize=False, use_multiprocessing=False), dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0).tolist()


def open_model(label: str, folder: Path) -> Embedder:
    """An embedder over ``folder``: ONNX when it holds model.onnx, model2vec otherwise; named by its label.

    Both kinds of folder say their width in ``config.json`` (``hidden_dim``).
    """
    dim = int(json.loads((folder / "config.json").read_text())["hidden_dim"])
    if (folder / "model.onnx").is_file():
        return OfflineEmbedder(folder, name=f"eval/{label}", dim=dim)
    return StaticEmbedder(folder, name=f"eval/{label}", dim=dim)


def docs_of(entries: Sequence[Entry]) -> list[EmbeddingDoc]:
    """The entries as the index stores them: one doc each, in its project, no repo."""
    return [
        EmbeddingDoc(key=e.id, producer=e.kind, text=e.text, kind=e.kind, project=e.project, projects=(e.project,), metadata={"title": e.title})
        for e in entries
    ]


def kernel_search(session: Session, q: Query, vector: list[float], mode: str, limit: int) -> list[str]:
    """The keys ``POST /search`` would answer for ``q`` in ``mode``, in rank order: the kernel's own search, scoped to q's project."""
    hits, _ = embeddings.search(session, vector, query=q.text, mode=mode, project=(q.project, None), limit=limit, one_per_key=True)
    return [h.key for h in hits]


def weighted_rrf(vector: Sequence[str], words: Sequence[str], words_weight: float) -> list[str]:
    """Reciprocal rank fusion with the word side weighted: an in-bench variant of the kernel's fusion, measured, not shipped."""
    scores: dict[str, float] = {}
    for weight, ranking in ((1.0, vector), (words_weight, words)):
        for rank, key in enumerate(ranking, 1):
            scores[key] = scores.get(key, 0.0) + weight / (RRF_K + rank)
    return sorted(scores, key=lambda k: (-scores[k], k))


def score(ranked: Sequence[str], relevant: Sequence[str]) -> tuple[float, float]:
    """(recall@5, reciprocal rank within 10) of one answer."""
    wanted = set(relevant)
    recall = len(wanted.intersection(ranked[:K_RECALL])) / len(wanted)
    rr = next((1.0 / rank for rank, key in enumerate(ranked[:K_MRR], 1) if key in wanted), 0.0)
    return recall, rr


def evaluate(url: str, label: str, embedder: Embedder, entries: list[Entry], queries: list[Query], modes: Sequence[str]) -> dict[str, Any]:
    """Embed and store the corpus with ``embedder``, ask every query in every mode; the figures of one model."""
    engine = create_engine(url)
    try:
        with Session(engine) as session:
            session.execute(text("DELETE FROM content_embeddings"))
            started = time.perf_counter()
            embeddings.store_docs(session, embedder, docs_of(entries), force_dim=True)
            session.commit()
            corpus_s = time.perf_counter() - started
            # The word side picks a query's rarer lexemes by pg_stats: statistics as a live index has them, taken now
            # rather than whenever autovacuum gets to it (which made models of one run see two word sides).
            session.execute(text("ANALYZE content_embeddings"))
            session.commit()
            embedder.embed(["warm up"])
            vectors, embed_s = [], []
            for q in queries:  # one text per call: what a search costs, not what a batch amortises
                t0 = time.perf_counter()
                vectors.append(embedder.embed([q.text])[0])
                embed_s.append(time.perf_counter() - t0)
            results: dict[str, Any] = {}
            sides: dict[str, list[list[str]]] = {}
            for mode in modes:
                ranked_all, per_query, search_s = [], [], []
                for q, vector in zip(queries, vectors, strict=True):
                    t0 = time.perf_counter()
                    ranked = kernel_search(session, q, vector, mode, K_MRR if mode == "hybrid" else FUSE_DEPTH)
                    search_s.append(time.perf_counter() - t0)
                    ranked_all.append(ranked)
                    per_query.append((q, *score(ranked, q.relevant)))
                sides[mode] = ranked_all
                results[mode] = {"table": _table(per_query), "search_ms": {"p50": pct(search_s, 50), "p95": pct(search_s, 95)}}
            if "vector" in sides and "words" in sides:
                for weight in WORDS_WEIGHTS:  # chosen on the tuning half; the held half says whether it holds
                    fused = [weighted_rrf(v, w, weight) for v, w in zip(sides["vector"], sides["words"], strict=True)]
                    results[f"rrf words x{weight}"] = {"table": _table([(q, *score(r, q.relevant)) for q, r in zip(queries, fused, strict=True)])}
    finally:
        engine.dispose()
    return {
        "label": label,
        "name": embedder.name,
        "dim": embedder.dim,
        "corpus_embed_s": round(corpus_s, 2),
        "query_embed_ms": {"p50": round(pct(embed_s, 50), 3), "p95": round(pct(embed_s, 95), 3)},
        "modes": results,
    }


def _table(per_query: list[tuple[Query, float, float]]) -> dict[str, dict[str, Any]]:
    """recall@5 and MRR@10 per half ("tune", "held", "all") and per half and kind ("held/error")."""
    groups: dict[str, list[tuple[float, float]]] = {}
    for q, recall, rr in per_query:
        for key in ("all", q.half, f"all/{q.kind}", f"{q.half}/{q.kind}"):
            groups.setdefault(key, []).append((recall, rr))
    return {
        key: {"n": len(vals), "recall@5": round(statistics.fmean(v[0] for v in vals), 3), "mrr@10": round(statistics.fmean(v[1] for v in vals), 3)}
        for key, vals in sorted(groups.items())
    }


def print_tables(reports: list[dict[str, Any]]) -> None:
    """The markdown tables docs/performance.md and ADR 0047 quote."""
    print("\n| model | mode | tune R@5 | tune MRR | held R@5 | held MRR | " + " | ".join(f"held {k} R@5/MRR" for k in QUERY_KINDS) + " |")
    print("|---|---|---|---|---|---|" + "---|" * len(QUERY_KINDS))
    for rep in reports:
        for mode, res in rep["modes"].items():
            t = res["table"]
            kinds = " | ".join(f"{t[f'held/{k}']['recall@5']:.2f} / {t[f'held/{k}']['mrr@10']:.2f}" if f"held/{k}" in t else "-" for k in QUERY_KINDS)
            row = f"| {rep['label']} | {mode} | {t['tune']['recall@5']:.3f} | {t['tune']['mrr@10']:.3f} | {t['held']['recall@5']:.3f} | {t['held']['mrr@10']:.3f} | {kinds} |"
            print(row)
    print("\n| model | mode | " + " | ".join(f"all {k} R@5/MRR" for k in QUERY_KINDS) + " |")
    print("|---|---|" + "---|" * len(QUERY_KINDS))
    for rep in reports:
        for mode, res in rep["modes"].items():
            t = res["table"]
            print(f"| {rep['label']} | {mode} | " + " | ".join(f"{t[f'all/{k}']['recall@5']:.2f} / {t[f'all/{k}']['mrr@10']:.2f}" for k in QUERY_KINDS) + " |")
    print("\n| model | dim | size MB | load s | query embed p50 / p95 ms | corpus embed s | search p50 / p95 ms (kernel hybrid) |")
    print("|---|---|---|---|---|---|---|")
    for rep in reports:
        h = rep["modes"].get("hybrid", next(iter(rep["modes"].values())))["search_ms"]
        e = rep["query_embed_ms"]
        print(
            f"| {rep['label']} | {rep['dim']} | {rep['size_mb']:.1f} | {rep['load_s']:.2f} | {e['p50']:.2f} / {e['p95']:.2f} | {rep['corpus_embed_s']:.1f} | {h['p50']:.1f} / {h['p95']:.1f} |"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", default=[], metavar="LABEL=FOLDER", help="a model to evaluate (repeatable)")
    parser.add_argument("--modes", default="vector,words,hybrid")
    parser.add_argument("--json", type=Path, help="write every figure here as JSON")
    args = parser.parse_args(argv)
    models = [tuple(spec.split("=", 1)) for spec in args.model] or [("shipped", str(OFFLINE_MODEL_DIR))]
    modes = [m for m in args.modes.split(",") if m]
    entries, queries = build()
    print(f"corpus: {len(entries)} entries in {len({e.project for e in entries})} projects; {len(queries)} queries", file=sys.stderr)
    reports = []
    with fresh_database("eval-retrieval") as url:
        command.upgrade(alembic_config(url), "heads")  # every head: a checkout may hold a revision in review beside main's
        for label, folder in models:
            started = time.perf_counter()
            embedder = open_model(label, Path(folder))
            embedder.embed(["load"])  # an ONNX model loads on its first embed
            load_s = time.perf_counter() - started
            report = evaluate(url, label, embedder, entries, queries, modes)
            report.update(load_s=round(load_s, 3), size_mb=_size(Path(folder)) / 1e6, folder=str(folder))
            reports.append(report)
            print(f"{label}: done", file=sys.stderr)
    print_tables(reports)
    if args.json:
        args.json.write_text(json.dumps({"reports": reports}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
