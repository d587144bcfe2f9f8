"""``GET /vault/search`` from the search index answers exactly what the file scan answers (revision 0008).

One varied vault, written through the real writers (arc files, lessons of
several projects in one shared log, decisions, milestones) plus notes of
every awkward shape (non-ASCII case mappings, CRLF lines, a long file cut in
blocks, empty files, filename hits, regex and LIKE characters, files the
walk skips), indexed once by ``rebuild_documents``. Every query of a list
(short tokens, non-ASCII, filename-only hits, absent tokens, many hit lines)
is asked with several prefixes, limits and context widths of the file scan
(``search_vault``, ``search_project``) and of the index (``search``), with
and without a project: the results are equal item by item. Then the route:
it answers from the index once the vault is indexed, follows upserts and
deletions, and falls back to the files when the vault is not.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from brain_core.textsearch import tokens
from brain_kernel.identity.projects import EXACT, resolve_project
from brain_kernel.index.rebuild import rebuild
from brain_kernel.search import search_docs
from brain_kernel.search.file_scan import search_project, search_vault
from brain_kernel.search.withdrawn import withdrawn
from brain_kernel.settings import Settings
from brain_kernel.vault_store import Vault
from tests.support.planting import arc_session, post, write_arc

NOTES = {
    "notes/Ünïcödé Straße.md": "# Straße\nSTRASSE und straße\nΣΑΣ ΟΔΟΣ σας\nİstanbul ıspanak\nKelvin K and ﬁle ligature\n🙂 emoji 🙂 line\n",
    "notes/crlf.txt": "first Retry line\r\nsecond line\r\n\r\nthird retry\r\r\n",
    "notes/Retry-Guide.MARKDOWN": "How to retry.\nNothing else here.\n",
    "notes/empty.md": "",
    "notes/newline.md": "\n",
    "notes/odd chars.md": "100% of a_b are [x] (y)* matched\n.* and %_ literally\n",
    "notes/many.md": "".join(f"line {i} has retry and cache\n" for i in range(45)),
    "deep/a/b/c.md": "nested retry cache parser\n",
    "deep/a/b/other.txt": "the parser is fine\n",
    ".obsidian/skip.md": "retry cache hidden\n",
    "node_modules/pkg/readme.md": "retry cache in modules\n",
    "notes/.hidden.md": "retry cache hidden file\n",
    "notes/data.json": '{"retry": "cache"}\n',
    # What COPY's text format escapes (the segments are written in it): tabs, backslashes, \N, \., DEL.
    "notes/escapes.md": "tab\there\\path\\retry\\N \\. end\nbyte\x7f retry\n\\\ttrailing\\\n",
}
# Long notes where a token fills at least 30 lines (the score's cap), in several mixes, so the shortcut
# that looks for files capping the score first has files to find, and files to pass over.
for i in range(8):
    NOTES[f"bulk/b{i}.md"] = "".join(
        f"retry {'cache ' if n % (i + 1) == 0 else ''}{'rareword ' if i == 5 and n == 3 else ''}line {n}\n" for n in range(31 + i * 3)
    )
# Files naming a token: one short of the cap whose name lifts it above the files that reach it (kept by
# the shortcut), and a short one it leaves out.
NOTES["bulk/retry-notes.md"] = "".join(f"retry note {n}\n" for n in range(25))
NOTES["bulk/cache-retry.txt"] = "one retry\n"
# A long note: hits on both sides of block boundaries, so snippets take context from neighbouring segments.
LONG = [f"filler line {i}" for i in range(200)]
for n in (0, 62, 63, 64, 65, 127, 128, 190, 199):
    LONG[n] = f"long retry hit {n} Cache"

QUERIES = [
    "retry",
    "RETRY cache",
    "a",
    "ca",
    "re",
    "é",
    "straße",
    "strasse",
    "σας",
    "ς",
    "i̇stanbul",
    "ı",
    "k",
    "ﬁle",
    "🙂",
    "lessons",
    "guide",
    "100%",
    "a_b",
    ".*",
    "[x]",
    "zzzabsent",
    "retry zzzabsent",
    "cache cache parser",
    "pin resolver",
    "md",
    "-",
    "filler 199",
    "hit",
    "\\path\\retry\\n",
    "\\.",
    "byte\x7f",
    "\\",
]


def _planted(client, settings: Settings, db: Session) -> Vault:
    vault = Vault(settings.vault)
    for rel, body in NOTES.items():
        path = vault.path(rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body.encode("utf-8"))
    vault.path("notes/long.md").write_text("\n".join(LONG) + "\n")
    write_arc(vault, [arc_session("s-api", "api", "org1/api", "Teach the retry parser to cache", hours_ago=3)])
    write_arc(vault, [arc_session("s-web", "web", "acme/web", "Retry the web cache warmup", hours_ago=4)])
    post(client, "lesson", "Always pin the resolver version before a retry.", repo="org1/api", title="Pin")
    post(client, "lesson", "The cache of web retries twice.\nSecond line of web.", repo="acme/web")
    post(client, "lesson", "Fix the secretq rotation; cache it.", repo="org1/api", title="Fix")
    post(client, "lesson", "Web parser lesson\nwith retry inside", repo="acme/web")
    post(client, "decision", "Retry with backoff for api.", title="Backoff", repo="org1/api")
    post(client, "milestone", "Shipped the cache for web.", repo="acme/web")
    rebuild(db, vault)
    search_docs.rebuild_documents(db, vault)
    db.commit()
    return vault


@pytest.fixture
def indexed(client, settings: Settings, db: Session) -> Vault:
    return _planted(client, settings, db)


def _scan(vault: Vault, q: str, prefix: str, limit: int, context: int) -> list[dict[str, Any]]:
    return [h.as_dict() for h in search_vault(vault, tokens(q), prefix=prefix, context_lines=context)[:limit]]


def _index(db: Session, q: str, prefix: str, limit: int, context: int, project: tuple[str, str | None] | None = None) -> list[dict[str, Any]]:
    return [h.as_dict() for h in search_docs.search(db, q, prefix, limit, context, project=project)]


def _short_codes(db: Session) -> bool:
    """Whether every indexed vault root's segments carry the codes of short grams (then short tokens use the GIN index)."""
    return search_docs.index_codes(db).version >= search_docs.SHORT_CODES


def test_the_index_answers_what_the_file_scans_answer(indexed: Vault, db: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a project (``search_vault``), then for two projects of one shared log (``search_project``); without a
    project also with every token counted frequent, and with some, so the files capping the score are looked for first."""
    shared = next(p.name for p in (indexed.root / "left/reference").iterdir() if p.name.startswith("lessons-"))
    prefixes = ["", "notes", "deep/a", "notes/crlf.txt", "left/reference/" + shared, "no/such"]
    # Neither the files nor the entries change within this test, and the scans read no setting of the index:
    # each distinct scan runs once, its ranking cut to each limit asked (they were 40% of the test's time).
    scans: dict[tuple[Any, ...], list[dict[str, Any]]] = {}

    def _scan(vault: Vault, q: str, prefix: str, limit: int, context: int) -> list[dict[str, Any]]:
        if (q, prefix, context) not in scans:
            scans[q, prefix, context] = [h.as_dict() for h in search_vault(vault, tokens(q), prefix=prefix, context_lines=context)]
        return scans[q, prefix, context][:limit]

    checked = 0
    for q, prefix in itertools.product(QUERIES, prefixes):
        for limit, context in ((20, 2), (3, 0), (200, 10)) if prefix in ("", "notes") else ((20, 2),):
            assert _index(db, q, prefix, limit, context) == _scan(indexed, q, prefix, limit, context), (q, prefix, limit, context)
            checked += 1
    assert checked > 250
    shortcuts = []
    real = search_docs._top_candidates

    def spy(*args: Any) -> list[str] | None:
        found = real(*args)
        shortcuts.append(found is not None)
        return found

    monkeypatch.setattr(search_docs, "_top_candidates", spy)
    for many in (1, 40):
        monkeypatch.setattr(search_docs, "MANY_CANDIDATES", many)
        for q in [*QUERIES, "retry rareword", "retry line", "cache rareword zzzabsent", "line"]:
            for prefix, limit in (("", 1), ("bulk", 3), ("", 20)):
                assert _index(db, q, prefix, limit, 1) == _scan(indexed, q, prefix, limit, 1), (many, q, prefix, limit)
    assert sum(shortcuts) > 10 and not all(shortcuts)  # the shortcut answered often, and fell back too
    # A walk that may read no file short of the cap gives up at its first miss, and the full ranking
    # answers the same; one that may read them all passes the misses (b1..b4 lack "cache" on most lines).
    monkeypatch.setattr(search_docs, "MANY_CANDIDATES", 1)
    for walk_lines, q in itertools.product((0, search_docs.WALK_LINES), ("retry cache", "cache", "line retry")):
        monkeypatch.setattr(search_docs, "WALK_LINES", walk_lines)
        shortcuts.clear()
        for prefix, limit in (("", 1), ("", 2), ("bulk", 8)):
            assert _index(db, q, prefix, limit, 1) == _scan(indexed, q, prefix, limit, 1), (walk_lines, q, prefix, limit)
        if q == "cache":  # b0 caps the score, b1..b5 do not, notes/many.md does
            assert shortcuts[:2] == [True, walk_lines > 0], walk_lines
    db.execute(text("ANALYZE vault_segments"))  # then how frequent a token is comes from the statistics
    monkeypatch.setitem(search_docs._stats, "key", None)
    assert search_docs._gram_frequencies(db.connection()) is not None
    for many, walk_candidates in itertools.product((1, 40), (0, search_docs.WALK_CANDIDATES)):  # walked, or ranked whole (few)
        monkeypatch.setattr(search_docs, "MANY_CANDIDATES", many)
        monkeypatch.setattr(search_docs, "WALK_CANDIDATES", walk_candidates)
        shortcuts.clear()
        for q in ["retry", "retry rareword", "cache rareword zzzabsent", "line", "ca"]:
            assert _index(db, q, "", 3, 1) == _scan(indexed, q, "", 3, 1), (many, q)
        assert any(shortcuts) == (many == 1 and walk_candidates == 0), (many, walk_candidates)  # the statistics say how few
    everything = _index(db, "retry", "", 200, 2)
    assert {r["path"] for r in everything} >= {"notes/long.md", "notes/crlf.txt", "deep/a/b/c.md"}
    assert not any(part.startswith(".") or part == "node_modules" for r in everything for part in r["path"].split("/"))

    # Projects read whole from their entries (every token counted frequent), then from the tokens' trigrams
    # (every token rare, as here, or the project too large to read whole).
    ways = ((search_docs.PROJECT_READ_LIMIT, 1), (search_docs.PROJECT_READ_LIMIT, search_docs.MANY_CANDIDATES), (0, 1))
    for ref, (read_limit, many) in itertools.product(("org1/api", "acme/web"), ways):
        monkeypatch.setattr(search_docs, "PROJECT_READ_LIMIT", read_limit)
        monkeypatch.setattr(search_docs, "MANY_CANDIDATES", many)
        found = resolve_project(db, ref)
        assert found.status == EXACT
        for q, prefix in itertools.product(QUERIES if many == 1 and read_limit else QUERIES[::3], ["", "left/reference/lessons-", "clusters"]):
            for limit, context in ((20, 2), (1, 10)) if not prefix else ((20, 2),):
                if (found.key, found.repo, q, prefix, context) not in scans:
                    hits = search_project(indexed, db, found.key, found.repo, tokens(q), prefix=prefix, context_lines=context)
                    scans[found.key, found.repo, q, prefix, context] = [h.as_dict() for h in hits]
                scan = scans[found.key, found.repo, q, prefix, context][:limit]
                assert _index(db, q, prefix, limit, context, project=(found.key, found.repo)) == scan, (ref, read_limit, many, q, prefix, limit, context)


def test_the_index_and_the_file_scan_leave_out_the_same_withdrawn_entries(client, indexed: Vault, db: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    """A retracted decision file leaves whole, a retracted lesson of the shared log its own lines (ADR 0064); the index,
    ranking every candidate or walking for the files that cap the score, answers what the scans answer."""
    long = client.post("/marker", json={"type": "decision", "content": "retry it\n" * 40, "attrs": {"repo": "org1/api", "title": "Long"}})
    assert long.status_code == 201  # a file that caps the score: the walk for such files must pass it by
    db.commit()
    decision = db.execute(text("SELECT id, vault_path FROM entries WHERE kind = 'decision' AND title <> 'Long'")).one()
    lesson = db.execute(text("SELECT id, vault_path FROM entries WHERE kind = 'lesson' AND content LIKE '%pin the resolver%'")).one()
    for entry_id in (decision.id, lesson.id, long.json()["entry_id"]):
        assert client.post(f"/entries/{quote(entry_id, safe='/:')}/retract", json={"reason": "wrong"}).status_code == 200
    hidden = withdrawn(db)
    assert hidden.files == {decision.vault_path, long.json()["vault_path"]} and hidden.entries == {lesson.vault_path: {lesson.id}}
    queries = ["retry", "backoff", "pin resolver", "resolver", "retry cache", "line", "cache", "a"]
    shortcuts = []
    real = search_docs._top_candidates

    def spy(*args: Any) -> list[str] | None:
        found = real(*args)
        shortcuts.append(found)
        return found

    monkeypatch.setattr(search_docs, "_top_candidates", spy)
    for many in (search_docs.MANY_CANDIDATES, 1):
        monkeypatch.setattr(search_docs, "MANY_CANDIDATES", many)
        monkeypatch.setattr(search_docs, "WALK_CANDIDATES", 0 if many == 1 else search_docs.WALK_CANDIDATES)  # walk, however few
        for q, prefix, (limit, context) in itertools.product(queries, ["", "left"], ((20, 2), (1, 0), (2, 0), (200, 10))):
            scan = [h.as_dict() for h in search_vault(indexed, tokens(q), prefix=prefix, context_lines=context, hidden=hidden)][:limit]
            assert _index(db, q, prefix, limit, context) == scan, (many, q, prefix, limit, context)
            every = [h.as_dict() for h in search_vault(indexed, tokens(q), prefix=prefix, context_lines=context)][:limit]
            assert [h.as_dict() for h in search_docs.search(db, q, prefix, limit, context, include_withdrawn=True)] == every, (many, q, prefix)
        found = resolve_project(db, "org1/api")
        for q, context in itertools.product(queries, (0, 2, 10)):
            scan = [h.as_dict() for h in search_project(indexed, db, found.key, found.repo, tokens(q), context_lines=context)]
            assert _index(db, q, "", 20, context, project=(found.key, found.repo)) == scan, (many, q, context)
    assert any(found is not None for found in shortcuts)  # the walk for files that cap the score ran, and passed them by
    assert not any(r["path"] == decision.vault_path for r in _index(db, "backoff", "", 20, 2))
    texts = [line for r in _index(db, "resolver", "", 20, 10) for s in r["snippets"] for line in s["snippet"].splitlines()]
    assert "Always pin the resolver version before a retry." not in texts  # the retracted body: no hit, no context


def test_the_route_answers_from_the_index_and_follows_writes(client, indexed: Vault, db: Session) -> None:
    def paths(**params: Any) -> list[str]:
        r = client.get("/vault/search", params=params)
        assert r.status_code == 200, r.text
        return [item["path"] for item in r.json()["results"]]

    assert "deep/a/b/c.md" in paths(q="nested")
    Path(indexed.path("deep/a/b/c.md")).unlink()  # gone from the disk only: the index still answers
    assert paths(q="nested") == ["deep/a/b/c.md"]
    assert paths(q="retry", prefix=".obsidian") == []  # a dot folder is never searched, even named as the prefix
    search_docs.delete_documents(db, ["deep/a/b/c.md"])
    search_docs.upsert_documents(db, [("deep/new.md", "a freshly nested note\n"), ("deep/x.json", "nested"), (".trash/t.md", "nested")])
    db.commit()
    assert paths(q="nested") == ["deep/new.md"]
    assert paths(q="freshly", project="org1/api") == []
    summary = search_docs.rebuild_documents(db, indexed)  # deep/new.md is not in the vault: a rebuild drops it
    db.commit()
    assert summary.removed == 1 and paths(q="nested") == []
    assert search_docs.rebuild_documents(db, indexed).documents == 0  # nothing changed: nothing read again or rewritten
    indexed.path("notes/crlf.txt").write_text("a rewritten nestedq line\n")
    again = search_docs.rebuild_documents(db, indexed)
    db.commit()
    assert (again.documents, again.removed) == (1, 0) and paths(q="nestedq") == ["notes/crlf.txt"]
    assert client.get("/vault/search", params={"q": "x", "prefix": "../x"}).status_code == 400


def test_an_entry_appended_to_a_log_adds_only_its_segments(client, indexed: Vault, db: Session) -> None:
    """What a marker's write hook costs: the day's log grows by one entry, and only that entry is written to the index."""
    rel = post(client, "lesson", "A first lesson of the day, indexed by its write hook.", repo="org1/api")["vault_path"]
    db.commit()
    before = {row[0]: row[1] for row in db.execute(text("SELECT first_line, xmin::text FROM vault_segments WHERE path = :p"), {"p": rel})}
    assert before  # the marker's write hook (brain_kernel.index.changes.sync_changes) indexed the log
    assert post(client, "lesson", "An appended lesson about quuxly retries.", repo="org1/api")["vault_path"] == rel
    assert search_docs.upsert_documents(db, [(rel, indexed.read_text(rel))]) == 0  # the hook did it already
    db.commit()
    after = {row[0]: row[1] for row in db.execute(text("SELECT first_line, xmin::text FROM vault_segments WHERE path = :p"), {"p": rel})}
    assert {k: after[k] for k in before} == before and len(after) > len(before)  # earlier segments untouched
    for q in ("quuxly", "retries", "appended lesson"):
        assert _index(db, q, "", 20, 2) == _scan(indexed, q, "", 20, 2), q
        found = resolve_project(db, "org1/api")
        scan = [h.as_dict() for h in search_project(indexed, db, found.key, found.repo, tokens(q), context_lines=2)]
        assert _index(db, q, "", 20, 2, project=(found.key, found.repo)) == scan, q
    indexed.path(rel).write_text(indexed.read_text(rel).replace("quuxly", "QUUXLY-edited"))  # an earlier byte changed: the log is rewritten
    assert search_docs.upsert_documents(db, [(rel, indexed.read_text(rel))]) == 1
    db.commit()
    assert _index(db, "quuxly-edited", "", 20, 2) == _scan(indexed, "quuxly-edited", "", 20, 2) != []


def test_a_hook_that_read_its_log_before_another_append_indexed_does_not_regress_it(client, indexed: Vault, db: Session) -> None:
    """Two markers to one log: A reads the log, B appends and indexes, then A's hook runs with its older text.

    Read again under the document's row lock, A's hook finds the index current
    (nothing rewritten); with the older text it would replace the log's
    segments with a copy that has lost B's entry.
    """
    rel = post(client, "lesson", "A first lesson of the day for the race.", repo="org1/api")["vault_path"]
    db.commit()
    older = indexed.read_text(rel)  # marker A's read, before B's append
    assert post(client, "lesson", "Marker B appended zorbly caching.", repo="org1/api")["vault_path"] == rel  # B's hook indexed it
    db.commit()
    before = dict(db.execute(text("SELECT first_line, ctid::text FROM vault_segments WHERE path = :p"), {"p": rel}).all())
    assert search_docs.upsert_documents(db, [(rel, older)], reread=indexed) == 0
    db.commit()
    assert dict(db.execute(text("SELECT first_line, ctid::text FROM vault_segments WHERE path = :p"), {"p": rel}).all()) == before
    assert _index(db, "zorbly", "", 20, 2) == _scan(indexed, "zorbly", "", 20, 2) != []


def test_the_route_scans_the_files_until_the_vault_is_indexed(client, settings: Settings, db: Session) -> None:
    vault = Vault(settings.vault)
    vault.path("notes").mkdir(exist_ok=True)
    vault.path("notes/a.md").write_text("unindexed needle\n")
    search_docs.upsert_documents(db, [("notes/other.md", "needle from a write hook\n")])  # a partial index is not used
    db.commit()
    assert not search_docs.indexed(db, vault)
    assert [r["path"] for r in client.get("/vault/search", params={"q": "needle"}).json()["results"]] == ["notes/a.md"]


def test_short_tokens_use_the_codes_of_an_index_that_has_them_and_a_rebuild_brings_an_older_one_up(indexed: Vault, db: Session) -> None:
    """Version 2 codes serve tokens of one or two characters through the GIN index; a root indexed before them
    (version 1) answers the same by ``strpos``, and the next rebuild writes every document again with them."""
    assert (search_docs._code("abc"), search_docs._code("ab"), search_docs._code("a")) == (0x616263, 0x6162, 0x61)
    m = search_docs._MIX  # a non-ASCII trigram keeps the code version 1 gave it
    assert search_docs._code("ßab") == (((0xDF * m[0] + 0x61 * m[1] + 0x62 * m[2]) & 0xFFFFFFFF) | 0x80000000) - 0x1_0000_0000
    assert len({search_docs._code(g) for g in ("é", "éa", "éab", "ß", "ßa")}) == 5

    def plan(q: str) -> str:
        params = {"t0": q, "g0": search_docs.token_grams(q)} if _short_codes(db) else {"t0": q}
        seg_any, _ = search_docs._token_tests([q], params)
        return seg_any[0]

    assert _short_codes(db) and "grams @>" in plan("ca")
    short = ["ca", "a", "é", "re", "q", "zz"]
    answers = {q: _scan(indexed, q, "", 20, 2) for q in short}
    assert all(_index(db, q, "", 20, 2) == answers[q] for q in short)
    db.execute(text("UPDATE vault_search_state SET codes = 1"))
    assert not _short_codes(db) and "grams @>" not in plan("ca")
    assert all(_index(db, q, "", 20, 2) == answers[q] for q in short)
    files = db.execute(text("SELECT count(*) FROM vault_documents")).scalar_one()
    summary = search_docs.rebuild_documents(db, indexed)
    assert summary.documents == files and _short_codes(db)  # every document written again
    assert all(_index(db, q, "", 20, 2) == answers[q] for q in short)
    assert search_docs.rebuild_documents(db, indexed).documents == 0


def test_a_first_build_of_a_large_vault_leaves_out_its_common_short_codes(indexed: Vault, db: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    """Version 3: a first build samples the vault and leaves out the ASCII short codes most segments hold. Their
    tokens are tested by ``strpos`` (the statistics' estimate is the sample's share) and answer what the scans
    answer, with and without a project; a rare short token still asks the GIN index, names keep every code, a
    write leaves the codes out too, and a rerun keeps them."""
    shared = next(p.name for p in (indexed.root / "left/reference").iterdir() if p.name.startswith("lessons-"))
    short = ["ca", "a", "é", "re", "q", "zz", "e", "k", "md", "-", "ς", "retry e", "cache a zzzabsent"]
    api = resolve_project(db, "org1/api")
    cases = [(q, prefix, project) for q in short for prefix in ("", "notes", "left/reference/" + shared) for project in (None, (api.key, api.repo))]

    def scan(q: str, prefix: str, project: tuple[str, str | None] | None) -> list[dict[str, Any]]:
        if project is None:
            return _scan(indexed, q, prefix, 20, 2)
        return [h.as_dict() for h in search_project(indexed, db, *project, tokens(q), prefix=prefix, context_lines=2)[:20]]

    answers = {case: scan(*case) for case in cases}
    assert search_docs.sample_common(indexed, [(p, st[0]) for p, st in search_docs.searchable_files(indexed)]) == {}  # a small vault
    monkeypatch.setattr(search_docs, "COMMON_MIN_BYTES", 0)
    monkeypatch.setattr(search_docs, "SAMPLE_MIN", 1)
    db.execute(text("DELETE FROM vault_documents"))  # and their segments: the next build is a first one
    search_docs.rebuild_documents(db, indexed)
    codes = search_docs.index_codes(db)
    assert codes.version == search_docs.CODES == 3
    assert search_docs._code("e") in codes.common and search_docs._code("q") not in codes.common and search_docs._code("zz") not in codes.common
    assert all(0 <= code <= 0xFFFF and search_docs.COMMON_SHARE < share <= 1 for code, share in codes.common.items())
    left = sorted(codes.common)
    assert db.execute(text("SELECT count(*) FROM vault_segments WHERE grams && CAST(:c AS int4[])"), {"c": left}).scalar_one() == 0
    assert db.execute(text("SELECT count(*) FROM vault_documents WHERE name_grams && CAST(:c AS int4[])"), {"c": left}).scalar_one() > 0
    for case in cases:
        assert [h.as_dict() for h in search_docs.search(db, case[0], case[1], 20, 2, project=case[2])] == answers[case], case
    db.execute(text("ANALYZE vault_segments"))  # the common tokens' estimates: the sample's shares of the rows
    monkeypatch.setitem(search_docs._stats, "key", None)
    for many in (1, 40):
        monkeypatch.setattr(search_docs, "MANY_CANDIDATES", many)
        for q in ("e", "retry e", "a ca", "zz"):
            assert _index(db, q, "", 3, 1) == _scan(indexed, q, "", 3, 1), (many, q)

    def plan(q: str) -> tuple[str, str]:
        sql: list[str] = []
        real = search_docs._token_tests
        monkeypatch.setattr(search_docs, "_token_tests", lambda wanted, params: (out := real(wanted, params), sql.append(out[0][0] + out[1][0]))[0])
        search_docs.search(db, q)
        monkeypatch.setattr(search_docs, "_token_tests", real)
        return sql[0], sql[-1]

    assert "s.grams @>" not in plan("e")[0] and "d.name_grams @>" in plan("e")[0] and "s.grams @>" in plan("q")[0]
    search_docs.upsert_documents(db, [("notes/new.md", "every e here, and a new zq\n")])
    grams = db.execute(text("SELECT grams FROM vault_segments WHERE path = 'notes/new.md'")).scalar_one()
    assert search_docs._code("zq") in grams and not set(grams) & set(left)
    assert search_docs.rebuild_documents(db, indexed).documents == 0
    assert search_docs.index_codes(db).common == codes.common


def test_the_sample_reads_the_first_lines_of_a_large_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``sample_common`` splits only a large file's first ``SAMPLE_BYTES`` (cut at a line's end) into segments: a code
    held only past them is not sampled, one held only within them is."""
    vault = Vault(tmp_path / "vault")
    vault.scaffold()
    head = "".join(f"line {n} holds qj here\n" for n in range(400))
    tail = "".join(f"line {n} holds wk here\n" for n in range(400))
    vault.write_atomic("notes/big.md", head + tail)
    monkeypatch.setattr(search_docs, "COMMON_MIN_BYTES", 0)
    monkeypatch.setattr(search_docs, "SAMPLE_MIN", 1)
    monkeypatch.setattr(search_docs, "SAMPLE_BYTES", len(head) + 5)  # the cut falls inside the tail's first line
    common = search_docs.sample_common(vault, [("notes/big.md", len(head + tail))])
    assert search_docs._code("qj") in common and search_docs._code("wk") not in common
    monkeypatch.setattr(search_docs, "SAMPLE_BYTES", 1 << 20)
    common = search_docs.sample_common(vault, [("notes/big.md", len(head + tail))])
    assert search_docs._code("qj") in common and search_docs._code("wk") in common


def test_a_rebuild_over_version_2_codes_writes_every_document_without_the_common_ones(indexed: Vault, db: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    """An index of version 2 (revision 0013's upgrade: ``common`` empty) is written again whole by the next rebuild,
    which chooses the common codes then; an index whose set is chosen keeps it over an older root's rewrite."""
    short = ["e", "a", "q", "ca", "retry e"]
    answers = {q: _scan(indexed, q, "", 20, 2) for q in short}
    db.execute(text("UPDATE vault_search_state SET codes = 2"))
    monkeypatch.setattr(search_docs, "COMMON_MIN_BYTES", 0)
    monkeypatch.setattr(search_docs, "SAMPLE_MIN", 1)
    files = db.execute(text("SELECT count(*) FROM vault_documents")).scalar_one()
    assert search_docs.rebuild_documents(db, indexed).documents == files
    codes = search_docs.index_codes(db)
    assert codes.version == 3 and search_docs._code("e") in codes.common
    assert db.execute(text("SELECT count(*) FROM vault_segments WHERE grams && CAST(:c AS int4[])"), {"c": sorted(codes.common)}).scalar_one() == 0
    assert all(_index(db, q, "", 20, 2) == answers[q] for q in short)
    db.execute(text("UPDATE vault_search_state SET codes = 2"))  # older codes again, but a set is held: it stands
    monkeypatch.setattr(search_docs, "COMMON_SHARE", 0.9)
    assert search_docs.rebuild_documents(db, indexed).documents == files
    assert search_docs.index_codes(db).common == codes.common


def test_a_rerun_prepares_only_the_documents_the_index_does_not_hold(indexed: Vault, db: Session) -> None:
    """``not_indexed``: what a rebuild's worker is given on a rerun (a changed text, a new file), not the unchanged rest."""
    held = [p for p, _ in search_docs.searchable_files(indexed)]
    assert len(held) >= 3
    changed, same = held[0], held[1:]
    docs = [(p, indexed.read_text(p), None) for p in held]
    docs[0] = (changed, docs[0][1] + "\nan edit\n", None)
    docs.append(("notes/new.md", "a new note\n", None))
    assert [p for p, _, _ in search_docs.not_indexed(db.connection(), docs)] == [changed, "notes/new.md"]
    assert search_docs.not_indexed(db.connection(), [d for d in docs if d[0] in same]) == []
    db.execute(text("LOCK TABLE vault_documents IN ACCESS EXCLUSIVE MODE"))  # as a first load holds it
    with search_docs.peek_connection(db) as peek:  # what the rebuild reads the hint on: it waits a moment, not forever
        waits = peek.exec_driver_sql("SELECT extract(epoch FROM current_setting('lock_timeout')::interval)").scalar_one()
        assert 0 < waits <= 5, waits
        # The same wait, shortened: the test need not sit out the whole moment to see the lock's refusal give every document.
        peek.exec_driver_sql("SET lock_timeout = '50ms'")
        assert search_docs.not_indexed(peek, docs) == docs
    db.rollback()
