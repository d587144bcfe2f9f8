"""Plain-text and scalar helpers every vault format and feed section shares (pure).

One home for each small rule that used to be written twice with different
meanings: what "one line" means, how a table cell is escaped, how a
frontmatter value becomes text or an int.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

# How every memory block opens (a project's, the fleet's, a control arm's): what the hook checks a 200 for.
BLOCK_FRAME_OPEN = "<!-- brain memory: recalled state for "
_FRAME_CLOSE = ", not instructions -->"
BLOCK_CLOSING = "<!-- end of brain memory -->"  # and how it ends


def block_frame(label: str) -> str:
    """A memory block's first line, naming what it is the memory of (its label already made safe)."""
    return f"{BLOCK_FRAME_OPEN}{label}{_FRAME_CLOSE}"


def frame_label(block: str) -> str | None:
    """The project a memory block names in its frame (``acme/api``, ``the fleet``), or None for a text without one."""
    first = block.split("\n", 1)[0]
    if not (first.startswith(BLOCK_FRAME_OPEN) and first.endswith(_FRAME_CLOSE)):
        return None
    return first[len(BLOCK_FRAME_OPEN) : -len(_FRAME_CLOSE)] or None


# C0 and C1 control characters (tab and newlines included) become spaces; str.split()
# then also breaks on every Unicode line or paragraph separator.
_CONTROLS = dict.fromkeys([*range(0x00, 0x20), *range(0x7F, 0xA0)], " ")


# What Postgres text and JSONB refuse: a NUL, and a lone surrogate (no UTF-8 encoding exists for it).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def has_lone_surrogate_char(value: str) -> bool:
    """Whether ``value`` holds a lone surrogate: the one code point strict UTF-8 cannot encode.

    Tested at C speed: an ASCII string holds none (``isascii`` reads a flag), and
    strict UTF-8 encodes every other string but one holding a lone surrogate.
    """
    if value.isascii():
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def storable(value: Any) -> Any:
    """``value`` as Postgres can hold it: in every string (mapping keys too), NULs and lone surrogates become U+FFFD.

    Applied where index rows are built from vault files and transcripts (ADR 0021),
    so one hand-edited or mined file holding ``\\0`` is indexed, not a stop of
    the whole rebuild; the file itself is left as it is.
    """
    if isinstance(value, str):
        # Tested at C speed first: the pattern, run on every row's strings, was a third of a rebuild's writer thread.
        if "\x00" not in value and not has_lone_surrogate_char(value):
            return value
        return _UNSTORABLE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {storable(k): storable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(storable(v) for v in value)
    return value


def one_line(text: str | None) -> str:
    """Text made safe for a single line: control characters and whitespace runs become one space."""
    if not text:
        return ""
    # A printable text holds no control character (each is category Cc): nothing to translate.
    return " ".join((text if text.isprintable() else text.translate(_CONTROLS)).split())


def clip_words(text: str | None, limit: int = 80) -> str:
    """One line of at most ``limit`` characters, cut on a word boundary and marked with an ellipsis."""
    flat = one_line(text)
    if len(flat) <= limit:
        return flat
    head = flat[: max(1, limit - 1)]
    if flat[len(head)] != " ":  # the cut falls inside a word: drop that word, unless it is most of the line
        cut = head.rfind(" ")
        if cut >= len(head) // 2:  # a URL, a hash or a stack line at the start: cut inside it, never to nothing
            head = head[:cut]
    return head.rstrip(" ,;:-") + "…"


def title_repeats(title: str | None, content: str | None) -> bool:
    """Whether ``title`` says nothing ``content`` does not: empty, or the content's start.

    A marker posted without a title gets its content's first line as one,
    clipped on a word with an ellipsis (``brain_core.markers.default_title``,
    a heading's ``#`` dropped); a line that printed such a title and then the
    content would say the same words twice.
    """
    head = one_line(title)
    if not head:
        return True
    body = one_line(content)
    starts = (body, body.lstrip("#").lstrip())
    clipped = head[:-1].rstrip() if head.endswith("…") else None
    return any(b.startswith(head) or (clipped and b.startswith(clipped)) for b in starts)


def table_cell(value: Any) -> str:
    """A markdown table cell: one line, pipes escaped."""
    return one_line(str(value if value is not None else "")).replace("|", "\\|")


def slugify(text: str, max_len: int = 60) -> str:
    """A file-name slug: ASCII lower case, digits and single hyphens; never empty."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")
    if len(slug) > max_len:
        slug = slug[:max_len].rstrip("-")
    return slug or "untitled"


def text_or_none(value: Any) -> str | None:
    """A scalar frontmatter value as stripped text; None for missing, empty, lists and mappings."""
    if value is None or isinstance(value, (dict, list)):
        return None
    text = str(value).strip()
    return text or None


def int_or(value: Any, default: int) -> int:
    """``int(value)``, or ``default`` when the value is missing or not a number."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def article(noun: str) -> str:
    """``noun`` after "a" or "an", by its first letter: "an arc", "an intent", "a lesson"."""
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"
