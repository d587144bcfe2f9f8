"""Which indexed entries are live, as SQL a reader applies (ADR 0048).

Search leaves withdrawn entries out and marks expired ones
(``brain_kernel.search.embeddings``); the feeds use ``live_sql``.

The state is in each entry's row, derived from its own file: ``status``
``superseded`` or ``retracted`` (withdrawn: out of feeds and search), and
``metadata.valid_until`` (expired once it has passed: out of feeds, still
searchable). ``valid_until`` is stored as ISO text in UTC with a ``Z``
(``brain_core.times.iso``), so a comparison of text with the moment written
the same way is a comparison of times, and needs no cast a bad value could
fail.
"""

from __future__ import annotations

import datetime as dt

from brain_core.curation import WITHDRAWN
from brain_core.times import iso

_WITHDRAWN_LIST = ", ".join(f"'{s}'" for s in WITHDRAWN)


def withdrawn_sql(alias: str) -> str:
    """SQL: the ``entries`` row ``alias`` is withdrawn (superseded or retracted)."""
    return f"coalesce({alias}.status IN ({_WITHDRAWN_LIST}), false)"


def expired_sql(alias: str, now_param: str) -> str:
    """SQL: the row ``alias`` has expired by the bound moment ``now_param`` (ISO text from ``now_text``)."""
    return f"coalesce({alias}.metadata ->> 'valid_until' <= {now_param}, false)"


def live_sql(alias: str, now_param: str) -> str:
    """SQL: the row ``alias`` is live at ``now_param``: neither withdrawn nor expired (what a feed serves).

    ``entry_live`` (revision 0019) is ``NOT withdrawn_sql AND NOT expired_sql`` as one inlined function.
    """
    return f"entry_live({alias}, {now_param})"


def now_text(now: dt.datetime) -> str:
    """The moment a reader binds for ``expired_sql`` / ``live_sql``."""
    text = iso(now)
    assert text is not None
    return text
