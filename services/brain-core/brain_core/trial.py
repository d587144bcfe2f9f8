"""The holdout trial (pure): who is in control, what control reads, and what the figures say (ADR 0050).

Assignment is by project, sticky, and reproducible from the record alone:
the seed is the first 8 bytes of ``sha256(identity + ":" + salt)`` (UTF-8)
as a big-endian integer, mod 100, and a seed below the control percentage
is control. The identity is the project's repository, else its key, else
the session id (the basis is recorded); a session with none of them is
``unassignable``: it gets the usual block and is never counted in an arm.

The report compares arms over projects, the unit of randomisation: each
project's sessions are averaged first, and the interval of the difference
of the arms' means comes from a bootstrap that resamples projects within
each arm (a cluster bootstrap), never sessions, whose outcomes within a
project are not independent.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from brain_core.text import BLOCK_CLOSING, block_frame

CONTROL, TREATMENT, UNASSIGNABLE = "control", "treatment", "unassignable"
BASES = ("repo", "project", "session")


@dataclass(frozen=True)
class TrialConfig:
    """The trial's setting: a control percentage (0 = off) and a salt (its id, not the salt, goes in records)."""

    control_percent: int = 0
    salt: str | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.control_percent <= 100:
            raise ValueError("the control percentage must be between 0 and 100")
        if self.control_percent and not self.salt:
            raise ValueError("a trial with a control percentage needs a salt")

    @property
    def salt_id(self) -> str | None:
        """A short public name of the salt: records tell trial periods apart without holding the salt."""
        return hashlib.sha256(self.salt.encode("utf-8")).hexdigest()[:12] if self.salt else None


@dataclass(frozen=True)
class Assignment:
    """One session's arm and everything needed to check it later."""

    arm: str
    basis: str | None  # "repo", "project" or "session"; None when unassignable
    identity: str | None
    seed: int | None
    control_percent: int
    salt_id: str | None


def seed_of(identity: str, salt: str) -> int:
    """The first 8 bytes of ``sha256(identity + ":" + salt)`` as a big-endian integer, mod 100."""
    digest = hashlib.sha256(f"{identity}:{salt}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % 100


def identity_of(repo: str | None, project: str | None, session_id: str | None) -> tuple[str | None, str | None]:
    """(basis, identity): the repository, else the project key, else the session id; (None, None) for none."""
    for basis, value in zip(BASES, (repo, project, session_id), strict=True):
        if value:
            return basis, value
    return None, None


def assign(config: TrialConfig, *, repo: str | None, project: str | None, session_id: str | None) -> Assignment:
    """The arm of a session: control when the trial is on and the identity's seed is below the percentage."""
    basis, identity = identity_of(repo, project, session_id)
    if identity is None:
        return Assignment(UNASSIGNABLE, None, None, None, config.control_percent, config.salt_id)
    seed = seed_of(identity, config.salt) if config.salt else None
    arm = CONTROL if seed is not None and seed < config.control_percent else TREATMENT
    return Assignment(arm, basis, identity, seed, config.control_percent, config.salt_id)


def control_block(label: str) -> str:
    """What a control session reads instead of its memory: the frame, and a line saying there is none to show."""
    return f"{block_frame(label)}\n## Project memory: {label}\n\n- No memory is shown in this block.\n{BLOCK_CLOSING}\n"


# -- recall used: which injected entries the session's assistant later names --------------------------

_WORD = re.compile(r"[\w./-]+")
PHRASE_WORDS = 6  # a run of this many words of an entry, found verbatim, counts as naming it


@dataclass(frozen=True)
class Injected:
    """An entry served to a session: its id, title and text, as recorded."""

    entry_id: str
    title: str = ""
    content: str = ""


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def _names(entry: Injected, lowered: str, said_words: str) -> bool:
    """Whether assistant text (lowered, and as its words) names the entry: its id, its title (3+ words), or a
    6-word run of its content. The text is prepared once per session, not per entry."""
    if entry.entry_id and entry.entry_id.lower() in lowered:
        return True
    title = _words(entry.title)
    if len(title) >= 3 and " ".join(title) in said_words:
        return True
    words = _words(entry.content)
    runs = {" ".join(words[i : i + PHRASE_WORDS]) for i in range(len(words) - PHRASE_WORDS + 1)}
    return any(run in said_words for run in runs)


def recall_used(injected: Iterable[Injected], assistant_texts: Iterable[str]) -> int:
    """How many injected entries the assistant's later text names (each counted once)."""
    said = "\n".join(assistant_texts)
    lowered, said_words = said.lower(), " ".join(_words(said))
    return sum(1 for entry in {e.entry_id: e for e in injected}.values() if _names(entry, lowered, said_words))


# -- the report ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SessionOutcome:
    """One session's observed outcomes (name to value), its project and arm."""

    project: str
    arm: str
    values: Mapping[str, float]


@dataclass(frozen=True)
class Comparison:
    """One outcome across the arms: means of project means, their difference (control - treatment) and its interval."""

    outcome: str
    treatment_mean: float | None
    control_mean: float | None
    difference: float | None
    low: float | None
    high: float | None
    treatment_projects: int
    control_projects: int


@dataclass(frozen=True)
class Report:
    """Per arm, projects and sessions; per outcome, the comparison."""

    projects: dict[str, int]
    sessions: dict[str, int]
    comparisons: list[Comparison] = field(default_factory=list)
    confidence: float = 0.95
    statement: str = ""


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def project_means(outcomes: Iterable[SessionOutcome], name: str, arm: str) -> list[float]:
    """The mean of ``name`` over each project's sessions in ``arm`` (projects with no value left out)."""
    per: dict[str, list[float]] = {}
    for o in outcomes:
        if o.arm == arm and name in o.values and o.values[name] is not None and not math.isnan(o.values[name]):
            per.setdefault(o.project, []).append(float(o.values[name]))
    return [_mean(v) for _, v in sorted(per.items())]


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    position = q * (len(sorted_values) - 1)
    lower, upper = math.floor(position), math.ceil(position)
    return sorted_values[lower] + (sorted_values[upper] - sorted_values[lower]) * (position - lower)


def cluster_bootstrap(
    treated: Sequence[float], control: Sequence[float], *, rounds: int = 2000, confidence: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """A percentile interval of mean(control) - mean(treated), resampling projects within each arm."""
    rng = random.Random(seed)  # fixed: the same records give the same report
    diffs = sorted(_mean(rng.choices(control, k=len(control))) - _mean(rng.choices(treated, k=len(treated))) for _ in range(rounds))
    tail = (1 - confidence) / 2
    return _quantile(diffs, tail), _quantile(diffs, 1 - tail)


def report(outcomes: Sequence[SessionOutcome], names: Sequence[str], *, rounds: int = 2000, confidence: float = 0.95) -> Report:
    """The trial's report over sessions of the two arms (unassignable sessions are counted apart, never compared)."""
    projects = {arm: len({o.project for o in outcomes if o.arm == arm}) for arm in (TREATMENT, CONTROL, UNASSIGNABLE)}
    sessions = {arm: sum(1 for o in outcomes if o.arm == arm) for arm in (TREATMENT, CONTROL, UNASSIGNABLE)}
    comparisons = []
    for n, name in enumerate(names):
        treated, control = project_means(outcomes, name, TREATMENT), project_means(outcomes, name, CONTROL)
        t_mean = _mean(treated) if treated else None
        c_mean = _mean(control) if control else None
        low = high = difference = None
        if len(treated) >= 2 and len(control) >= 2:
            difference = c_mean - t_mean  # type: ignore[operator]
            low, high = cluster_bootstrap(treated, control, rounds=rounds, confidence=confidence, seed=n)
        comparisons.append(Comparison(name, t_mean, c_mean, difference, low, high, len(treated), len(control)))
    return Report(projects, sessions, comparisons, confidence, statement(projects))


def statement(projects: Mapping[str, int]) -> str:
    """What the figures can and cannot say at this size, in plain words."""
    smaller = min(projects.get(TREATMENT, 0), projects.get(CONTROL, 0))
    if smaller < 2:
        return "Not enough projects in both arms to compare: at least two projects in each arm are needed for an interval."
    size = "small" if smaller < 20 else "moderate" if smaller < 100 else "large"
    return (
        f"{smaller} projects in the smaller arm: a {size} sample. Differences are control minus treatment, over project means; "
        "an interval that covers 0 does not show that memory has no effect, only that this sample cannot tell. "
        "The outcomes are what the kernel observes (transcripts, markers, injection records), not whether the work was right; "
        "several outcomes are compared at once, so one interval in twenty may exclude 0 by chance."
    )
