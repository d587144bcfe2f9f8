"""The one serialiser of dataclasses (``brain_core.jsonable``) and the job summaries written by it."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from brain_core.jsonable import SORTED_KEYS, JobSummary, json_object, to_json
from brain_core.textsearch import Hit
from brain_kernel.index.entries import ReindexSummary
from brain_kernel.search.embed_run import EmbedSummary
from brain_ops.backfill.run import BackfillSummary
from brain_ops.scrub import ScrubSummary


@dataclass
class _Inner:
    at: dt.datetime
    tags: frozenset[str]


@dataclass
class _Outer(JobSummary):
    name: str
    inner: _Inner
    pairs: tuple[int, ...]
    by_kind: Counter[str] = field(default_factory=Counter, metadata=SORTED_KEYS)
    extra: dict[str, Any] = field(default_factory=dict)


def test_a_dataclass_is_its_fields_in_order_with_nested_values_made_plain() -> None:
    when = dt.datetime(2026, 3, 1, 12, 30, 5, 999, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    outer = _Outer("run", _Inner(when, frozenset({"b", "a"})), (1, 2), Counter({"z": 1, "a": 2}), {"b": 1, "a": [(3,)]})
    assert json.dumps(outer.as_dict()) == json.dumps(
        {
            "name": "run",
            "inner": {"at": "2026-03-01T10:30:05Z", "tags": ["a", "b"]},
            "pairs": [1, 2],
            "by_kind": {"a": 2, "z": 1},  # SORTED_KEYS: sorted
            "extra": {"b": 1, "a": [[3]]},  # any other mapping keeps its order
        }
    )


def test_values_that_are_not_containers_pass_through() -> None:
    assert [to_json(v) for v in ("x", 1, 1.5, None, True)] == ["x", 1, 1.5, None, True]
    assert to_json(None) is None and to_json([]) == []


def test_a_summary_copy_does_not_share_its_lists() -> None:
    summary = ReindexSummary(skipped=["a.md"])
    summary.as_dict()["skipped"].append("b.md")
    assert summary.skipped == ["a.md"]


def test_the_summaries_print_their_keys_in_the_documented_order() -> None:
    """The order the hand-written bodies had, now the order of the fields (docs/cli.md, docs/http.md)."""
    assert list(ScrubSummary().as_dict()) == ["scanned", "changed", "unchanged", "secrets_removed", "kinds", "skipped", "dry_run", "files_written", "index"]
    assert list(BackfillSummary(dry_run=True).as_dict()) == [
        *("scanned", "changed", "unchanged", "unresolved", "by_source", "by_outcome", "dry_run"),
        *("files_written", "markers", "index", "skipped"),
    ]
    assert list(EmbedSummary().as_dict()) == ["entries", "embedded", "relabelled", "unchanged", "chunks", "pruned", "seconds", "by_kind", "chunks_per_s"]
    hit = Hit(path="a.md", score=1, match_count=1, tokens_matched=1, tokens_total=1, filename_match=False, title="a")
    assert list(json_object(hit)) == ["path", "score", "match_count", "tokens_matched", "tokens_total", "filename_match", "snippets", "title"]


def test_an_embed_summary_rounds_its_seconds_and_adds_its_rate() -> None:
    summary = EmbedSummary(chunks=10, seconds=4.0049, by_kind={"lesson": 1, "arc": 2})
    assert summary.as_dict() == {
        "entries": 0,
        "embedded": 0,
        "relabelled": 0,
        "unchanged": 0,
        "chunks": 10,
        "pruned": 0,
        "seconds": 4.0,
        "by_kind": {"arc": 2, "lesson": 1},
        "chunks_per_s": 2.5,
    }
    assert EmbedSummary().as_dict()["chunks_per_s"] is None
