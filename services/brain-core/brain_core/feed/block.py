"""The memory block (pure): one project's memory as markdown a session reads at its start (ADR 0040).

``serve_block`` turns the same rows the JSON project feed assembles
(``ProjectRef`` and ``ProjectMemory``) into one text, so the hook, the
operator page and a trial's records all see the same bytes. Its invariants:

- it is framed as recalled state, not instructions: an opening comment, a
  ``## Project memory`` heading, fixed ``###`` section headings and a closing
  comment, all written here; every other line is a bullet this module starts
  (``- ``), holding one entry flattened to one line, clipped, with fences,
  HTML comment openers and closers escaped (``neutral``), so no entry can
  close the frame, open a section or start a code block;
- sections come in a fixed order, each with its own cap, and with ``worktree``
  the entries of that worktree come first inside each section (P's memory
  only: the rows are already P's);
- what a cap or ``max_bytes`` leaves out is counted on one line before the
  closing comment, saying how to get it;
- the text is never over ``max_bytes`` in UTF-8: whole lines are kept or
  left out, so no character is ever cut.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from brain_core.entries import EntryRecord
from brain_core.feed.intent import derive_intent
from brain_core.feed.keeper_files import SEVERITY_ORDER
from brain_core.feed.project import ProjectMemory, ProjectRef, fleet_blocks, intent_parts, reaching_blocks
from brain_core.feed.repeats import counted, times
from brain_core.feed.sections import day, digest, heat_text, hot_arc_blurb
from brain_core.membership import inject_agents, inject_is_fleet
from brain_core.text import BLOCK_CLOSING, block_frame, clip_words, one_line, title_repeats

DEFAULT_MAX_BYTES = 6000
MIN_MAX_BYTES = 1024
MAX_MAX_BYTES = 65536
ENTRY_CHARS = 300  # one entry's line, before its bullet and labels
LABEL_CHARS = 100  # the project's name in the frame


@dataclass(frozen=True)
class BlockCaps:
    """How many entries each section shows at most."""

    signals: int = 6
    arcs: int = 5
    decisions: int = 5
    lessons: int = 8
    milestones: int = 4
    inject: int = 3


@dataclass(frozen=True)
class _Section:
    heading: str
    noun: tuple[str, str]  # singular, plural: what the omission line counts
    lines: tuple[str, ...]  # every candidate line, best first
    cap: int
    ids: tuple[str, ...] = ()  # the entry id behind each line, when the lines are entries
    # the ids a line stands for besides its own (a repeated lesson's rewordings): given with it, so a prompt's recall
    # never serves them again as news
    folded: tuple[tuple[str, ...], ...] = ()


def _entries(heading: str, noun: tuple[str, str], records: Sequence[EntryRecord], line: Callable[[EntryRecord], str], cap: int) -> _Section:
    return _Section(heading, noun, tuple(line(r) for r in records), cap, tuple(r.id for r in records))


@dataclass(frozen=True)
class Rendered:
    """A block as served: its text, the ids of the entries shown, and whether a cap or the byte budget left some out."""

    text: str
    entry_ids: tuple[str, ...]
    cut: bool
    key: str | None = None  # the project's key and repository (None for the fleet's block)
    repo: str | None = None


_FENCE = re.compile(r"`{3,}|~{3,}")


def neutral(text: str | None, limit: int = ENTRY_CHARS) -> str:
    """Entry text made inert inside the block: one line, clipped, no fence, no HTML comment opener or closer.

    A run of three or more backticks or tildes gets each character escaped
    (markdown shows it as typed); ``<!--`` and ``-->`` become ``&lt;!--`` and
    ``--&gt;``. The text never starts a line (a bullet precedes it), so a
    ``#`` in it is never a heading. The tags an agent's harness wraps context
    in (``</system-reminder>``, ``<user>``...) are escaped the same way, so an
    entry can no more close or fake that wrapper than the block's own frame;
    and invisible format characters (bidi overrides, zero-width spaces) go, so
    a line reads as its bytes do.
    """
    flat = _INVISIBLE.sub("", clip_words(text, limit))
    flat = _FENCE.sub(lambda m: "".join("\\" + c for c in m.group(0)), flat)
    flat = _HARNESS_TAG.sub(lambda m: "&lt;" + m.group(0)[1:], flat)
    return flat.replace("<!--", "&lt;!--").replace("-->", "--&gt;")


# Format characters (Unicode Cf) that change how a line reads without showing: bidi embeddings, overrides and
# isolates, zero-width spaces and joiners, the BOM, the soft hyphen.
_INVISIBLE = re.compile("[\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff]")
# The wrappers agents' harnesses put around hook output and turns: an entry must not open or close one.
_HARNESS_TAG = re.compile(
    r"</?(?:system|system-reminder|user|assistant|human|instructions|context|tool_use|tool_result|function_calls|"
    r"function_results|invoke|parameter|document|documents)\b[^>]*>",
    re.IGNORECASE,
)


def _titled(title: str | None, content: str | None) -> str:
    """``title: content``, or the content alone when the title only repeats its start."""
    head, body = one_line(title), one_line(content)
    if title_repeats(head, body):
        return body or head
    return f"{head}: {body}" if body else head


def _ranked(records: Sequence[EntryRecord], worktree: str | None) -> list[EntryRecord]:
    """Records of ``worktree`` first (stable), the others after in their order."""
    if not worktree:
        return list(records)
    return sorted(records, key=lambda r: not _of_worktree(r, worktree))


def _of_worktree(record: EntryRecord, worktree: str) -> bool:
    if record.meta.get("worktree") == worktree:
        return True
    trees = record.meta.get("worktrees")
    return isinstance(trees, list) and worktree in trees


@dataclass(frozen=True)
class Stale:
    """What the session's checkout says of an entry: the paths it names that changed since its commit."""

    paths: tuple[str, ...]
    since: str  # the entry's commit
    commits: int | None = None  # commits from it to the checkout's HEAD, when known

    def note(self) -> str:
        shown = ", ".join(self.paths[:3]) + (f" and {len(self.paths) - 3} more" if len(self.paths) > 3 else "")
        ago = f", {self.commits} commit{'' if self.commits == 1 else 's'} ago" if self.commits is not None else ""
        return f"may be stale: {shown} changed since {self.since[:7]}{ago}"


MAX_STALE = 100  # entries one request may tag: more than a block shows
_COMMIT = re.compile(r"[0-9a-f]{4,64}")


def parse_stale(text: str) -> dict[str, Stale]:
    """``{"<entry id>": {"paths": [...], "since": "<commit>", "commits": N}}`` as a client sends it; ValueError with the reason."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):  # nested deeper than the parser walks: as malformed
        raise ValueError("stale must be a JSON object") from None
    if not isinstance(data, dict) or len(data) > MAX_STALE:
        raise ValueError(f"stale must be a JSON object of at most {MAX_STALE} entries")
    found: dict[str, Stale] = {}
    for entry, value in data.items():
        paths = value.get("paths") if isinstance(value, dict) else None
        since = value.get("since") if isinstance(value, dict) else None
        commits = value.get("commits") if isinstance(value, dict) else None
        if not isinstance(paths, list) or not paths or not all(isinstance(p, str) and 0 < len(p) <= 300 for p in paths):
            raise ValueError(f"stale[{entry!r}].paths must be a list of paths")
        if not isinstance(since, str) or not _COMMIT.fullmatch(since):
            raise ValueError(f"stale[{entry!r}].since must be a commit id")
        if commits is not None and (not isinstance(commits, int) or isinstance(commits, bool) or commits < 0):
            raise ValueError(f"stale[{entry!r}].commits must be a count")
        found[entry] = Stale(tuple(paths[:20]), since, commits)
    return found


def _tag(record: EntryRecord, worktree: str | None, stale: Mapping[str, Stale] | None = None) -> str:
    tags = f" [worktree {worktree}]" if worktree and _of_worktree(record, worktree) else ""
    seen = stale.get(record.id) if stale else None
    return tags + (f" [{neutral(seen.note(), 200)}]" if seen is not None else "")


def _signal_line(record: EntryRecord, where: str, stale: Mapping[str, Stale] | None = None) -> str:
    severity = one_line(record.severity or "info").lower()
    return f"- {day(record.occurred_at)} {neutral(severity, 20)} ({neutral(where, LABEL_CHARS)}){_tag(record, None, stale)}: {neutral(_titled(record.title, record.content))}"


def _arc_line(record: EntryRecord, worktree: str | None) -> str:
    d = digest(record)
    facts = f"heat {heat_text(d.heat)}, {d.status or 'active'}"
    return f"- {neutral(d.cluster_id, 80)} ({neutral(facts, 60)}){_tag(record, worktree)}: {neutral(hot_arc_blurb(record))}"


def _decision_line(record: EntryRecord, worktree: str | None, stale: Mapping[str, Stale] | None) -> str:
    status = f" ({neutral(record.status, 30)})" if record.status else ""
    if record.content and title_repeats(record.title, record.content):
        return f"- {day(record.occurred_at)} {neutral(record.content)}{status}{_tag(record, worktree, stale)}"
    return f"- {day(record.occurred_at)} {neutral(record.title, 120)}{status}{_tag(record, worktree, stale)}: {neutral(record.content)}"


def _log_line(record: EntryRecord, worktree: str | None, stale: Mapping[str, Stale] | None) -> str:
    return f"- {day(record.occurred_at)}{_tag(record, worktree, stale)} {neutral(_titled(record.title, record.content))}"


def _inject_line(record: EntryRecord, pid: str) -> str:
    where = "fleet-wide" if inject_is_fleet(record) else pid
    if agents := inject_agents(record):  # a reader whose agent is unknown sees whom it is for (ADR 0070)
        where = f"{where}, for {' and '.join(sorted(agents))}"
    return f"- ({neutral(where, LABEL_CHARS)}) {neutral(_titled(record.title, record.content))}"


def _sections(
    project: ProjectRef,
    memory: ProjectMemory,
    *,
    now: dt.datetime,
    worktree: str | None,
    key_is_unique: bool,
    caps: BlockCaps,
    stale: Mapping[str, Stale] | None,
    agent: str | None,
) -> list[_Section]:
    pid = project.id
    if not project.known:  # an unknown project has no memory of its own: the fleet-wide parts only
        memory = ProjectMemory(fleet_signals=memory.fleet_signals, inject=memory.inject)
    signals = [*_ranked(memory.project_signals, worktree), *memory.fleet_signals]
    own = len(memory.project_signals)
    if project.known:
        focus, intent, _ = intent_parts(project, memory)
        about = [f"- {neutral(focus)}", f"- Intent: {neutral(intent, 2 * ENTRY_CHARS)}"]
    else:
        about = [f"- No project memory yet for {neutral(pid, LABEL_CHARS)}."]
    blocks = reaching_blocks(project, memory, now=now, key_is_unique=key_is_unique, agent=agent)
    lined = _most_severe_kept([(r, _signal_line(r, pid, stale) if n < own else _signal_line(r, "fleet-wide")) for n, r in enumerate(signals)], caps.signals)
    return [
        _Section("Signals", ("signal", "signals"), tuple(line for _, line in lined), caps.signals, tuple(r.id for r, _ in lined)),
        _Section("Focus and intent", ("focus line", "focus lines"), tuple(about), len(about)),
        _entries("Hot arcs", ("arc", "arcs"), _ranked(memory.arcs, worktree), lambda r: _arc_line(r, worktree), caps.arcs),
        _entries("Decisions", ("decision", "decisions"), _ranked(memory.decisions, worktree), lambda r: _decision_line(r, worktree, stale), caps.decisions),
        _lessons(memory, worktree, stale, caps.lessons),
        _entries("Milestones", ("milestone", "milestones"), _ranked(memory.milestones, worktree), lambda r: _log_line(r, worktree, stale), caps.milestones),
        _entries("Inject blocks", ("inject block", "inject blocks"), blocks, lambda r: _inject_line(r, pid), caps.inject),
    ]


def _most_severe_kept(lined: list[tuple[EntryRecord, str]], cap: int) -> list[tuple[EntryRecord, str]]:
    """The signals the cap keeps are the most severe (then as ordered: the project's first, newest first); they keep
    that order, and the rest follow for the cap to leave out: a fleet-wide critical outranks the project's info."""
    rank = sorted(range(len(lined)), key=lambda i: (-SEVERITY_ORDER.get((lined[i][0].severity or "").lower(), 0), i))
    kept = set(rank[:cap])
    return [x for i, x in enumerate(lined) if i in kept] + [x for i, x in enumerate(lined) if i not in kept]


def _lessons(memory: ProjectMemory, worktree: str | None, stale: Mapping[str, Stale] | None, cap: int) -> _Section:
    """The lessons, a repeated one once with its count (``brain_core.feed.repeats``); its line names the newest's id, and
    the block's served ids hold the whole group."""
    shown = counted(_ranked(memory.lessons, worktree), memory.repeats)
    members: dict[str, list[str]] = {}
    for member, head in memory.repeats.items():
        members.setdefault(head, []).append(member)
    return _Section(
        "Lessons",
        ("lesson", "lessons"),
        tuple(_log_line(r, worktree, stale) + times(n) for r, n in shown),
        cap,
        tuple(r.id for r, _ in shown),
        tuple(tuple(sorted(members.get(r.id, ()))) for r, _ in shown),
    )


def _size(lines: Sequence[str]) -> int:
    return sum(len(line.encode("utf-8")) + 1 for line in lines)  # each line ends with "\n"


def _omitted_line(counts: Sequence[tuple[int, tuple[str, str]]], more: str) -> str | None:
    parts = [f"{n} more {noun[0] if n == 1 else noun[1]}" for n, noun in counts if n]
    if not parts:
        return None
    return f"… {', '.join(parts)}: {more} or the brain_feed MCP tool"


def serve_block(
    project: ProjectRef,
    memory: ProjectMemory,
    *,
    now: dt.datetime,
    max_bytes: int = DEFAULT_MAX_BYTES,
    worktree: str | None = None,
    key_is_unique: bool = True,
    caps: BlockCaps = BlockCaps(),
    stale: Mapping[str, Stale] | None = None,
    agent: str | None = None,
) -> Rendered:
    """P's memory block: framed, sections in order within their caps, never over ``max_bytes`` UTF-8 bytes;
    with what an injection record keeps: the entry ids shown and whether anything was cut.

    ``stale`` (entry id to what changed, as the session's checkout found it)
    tags those entries' lines ``[may be stale: ...]``. ``agent`` (the
    session's, when known) leaves out inject blocks aimed at other agents
    (ADR 0070). ValueError when ``max_bytes`` is below ``MIN_MAX_BYTES``.
    """
    label = neutral(project.id, LABEL_CHARS)
    head = [block_frame(label), f"## Project memory: {label}"]
    sections = _sections(project, memory, now=now, worktree=worktree, key_is_unique=key_is_unique, caps=caps, stale=stale, agent=agent)
    return dataclasses.replace(_render(head, sections, max_bytes=max_bytes, more=f"GET /feed?project={label}"), key=project.key, repo=project.repo)


def render_fleet_block(
    memory: ProjectMemory,
    *,
    now: dt.datetime,
    max_bytes: int = DEFAULT_MAX_BYTES,
    caps: BlockCaps = BlockCaps(),
    agent: str | None = None,
) -> Rendered:
    """The block a session in no project reads (ADR 0040): fleet-wide signals, the fleet's focus, its hottest arcs, fleet inject blocks.

    ``memory`` holds fleet rows only: ``fleet_signals``, ``arcs`` (the fleet's
    hottest, each labelled with its project) and ``inject`` (blocks of no
    project; only the live ones aimed at the whole fleet, and at ``agent``
    when known, are shown). No project's lessons, decisions or milestones:
    those are that project's sessions' memory.
    """
    head = [block_frame("the fleet"), "## Fleet memory (this folder is in no known project)"]
    focus = derive_intent([digest(a) for a in memory.arcs], subject="the fleet")
    sections = [
        _entries("Signals", ("signal", "signals"), memory.fleet_signals, lambda r: _signal_line(r, "fleet-wide"), caps.signals),
        _Section("Focus and intent", ("focus line", "focus lines"), (f"- {neutral(focus, 2 * ENTRY_CHARS)}",), 1),
        _entries("Hot arcs", ("arc", "arcs"), memory.arcs, _fleet_arc_line, caps.arcs),
        _entries(
            "Inject blocks", ("inject block", "inject blocks"), fleet_blocks(memory.inject, now=now, agent=agent), lambda r: _inject_line(r, ""), caps.inject
        ),
    ]
    return _render(head, sections, max_bytes=max_bytes, more="GET /feed")


def _fleet_arc_line(record: EntryRecord) -> str:
    d = digest(record)
    where = record.repo or record.project or "no project"
    facts = f"heat {heat_text(d.heat)}, {d.status or 'active'}, {where}"
    return f"- {neutral(d.cluster_id, 80)} ({neutral(facts, LABEL_CHARS + 40)}): {neutral(hot_arc_blurb(record))}"


def _render(head: list[str], sections: Sequence[_Section], *, max_bytes: int, more: str) -> Rendered:
    """The frame around ``sections``' lines, never over ``max_bytes``.

    Lines are taken in section order while the frame, the lines taken and the
    omission line counting everything not taken still fit; the first line
    that does not fit ends the taking, so a later small line never jumps an
    earlier one.
    """
    if max_bytes < MIN_MAX_BYTES:
        raise ValueError(f"max_bytes must be at least {MIN_MAX_BYTES}")
    taken = [0] * len(sections)
    body: list[str] = []

    def omitted(extra_at: int = -1) -> str | None:
        counts = [(len(s.lines) - taken[i] - (1 if i == extra_at else 0), s.noun) for i, s in enumerate(sections)]
        return _omitted_line(counts, more)

    full = False
    shown: list[str] = []
    for i, section in enumerate(sections):
        for n, line in enumerate(section.lines[: section.cap]):
            if full:
                break
            new = (["", f"### {section.heading}"] if taken[i] == 0 else []) + [line]
            tail = omitted(extra_at=i)
            if _size([*head, *body, *new, *(["", tail] if tail else []), BLOCK_CLOSING]) > max_bytes:
                full = True
                break
            body.extend(new)
            taken[i] += 1
            if section.ids:
                shown.append(section.ids[n])
                shown.extend(section.folded[n] if section.folded else ())
    tail = omitted()
    return Rendered("\n".join([*head, *body, *(["", tail] if tail else []), BLOCK_CLOSING]) + "\n", tuple(shown), tail is not None)
