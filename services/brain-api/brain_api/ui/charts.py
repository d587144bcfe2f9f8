"""Charts of the operator pages, drawn here as inline SVG (no script, nothing fetched, ADR 0049).

Each function takes plain numbers and returns the SVG as ``Markup``; every
text it writes is escaped. Colours come from the page's stylesheet through
class names (``series-0`` ...), so the charts follow its light and dark
schemes. A chart is a picture for the eye only (``aria-hidden``): the page
puts the same numbers in a table beside it for screen readers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from markupsafe import Markup, escape

WIDTH, HEIGHT = 640, 200
LEFT, RIGHT, TOP, BOTTOM = 44, 12, 12, 28  # the plot's margins: axis labels live there


def _number(value: float) -> str:
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}"


def _top(values: Sequence[float]) -> float:
    """The axis's top: the largest value (at least 1); for whole numbers (counts) even, so the half gridline is whole too."""
    top = max([*values, 1.0])
    if all(float(v).is_integer() for v in values):
        top = math.ceil(top)
        top += top % 2
    return top


def _frame(inner: list[str], *, width: int, height: int, label: str) -> Markup:
    head = f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" aria-hidden="true" focusable="false">'
    return Markup(head + f"<title>{escape(label)}</title>" + "".join(inner) + "</svg>")


def _axis(top: float, *, width: int, height: int, unit: str) -> list[str]:
    """The y axis's gridlines at 0, half and the top value, labelled, and the baseline."""
    out = []
    for frac in (0.0, 0.5, 1.0):
        y = height - BOTTOM - frac * (height - TOP - BOTTOM)
        out.append(f'<line class="grid" x1="{LEFT}" y1="{y:.1f}" x2="{width - RIGHT}" y2="{y:.1f}"/>')
        out.append(f'<text class="tick" x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{escape(_number(top * frac))}{escape(unit)}</text>')
    return out


def bars(items: Sequence[tuple[str, float]], *, label: str, unit: str = "", width: int = WIDTH, height: int = HEIGHT) -> Markup:
    """A vertical bar per (label, value), labelled under its bar; the axis starts at zero."""
    top = _top([v for _, v in items])
    plot_w = width - LEFT - RIGHT
    plot_h = height - TOP - BOTTOM
    inner = _axis(top, width=width, height=height, unit=unit)
    n = max(1, len(items))
    step = plot_w / n
    longest = max((len(name) for name, _ in items), default=1)
    every = max(1, math.ceil(n * (longest * 6.5 + 10) / plot_w))  # labels (11 px type, about 6.5 px a character) never overlap
    for i, (name, value) in enumerate(items):
        h = plot_h * (value / top)
        x = LEFT + i * step + step * 0.15
        inner.append(f'<rect class="bar series-0" x="{x:.1f}" y="{height - BOTTOM - h:.1f}" width="{step * 0.7:.1f}" height="{h:.1f}"/>')
        if i % every == 0:
            centre, half = x + step * 0.35, len(name) * 3.25
            at, anchor = (width - 2, "end") if centre + half > width else (centre, "middle")  # the last label stays inside
            inner.append(f'<text class="tick" x="{at:.1f}" y="{height - BOTTOM + 16}" text-anchor="{anchor}">{escape(name)}</text>')
    return _frame(inner, width=width, height=height, label=label)


def lines(
    x_labels: Sequence[str],
    series: Sequence[tuple[str, Sequence[float | None]]],
    *,
    label: str,
    unit: str = "",
    top: float | None = None,
    width: int = WIDTH,
    height: int = HEIGHT,
) -> Markup:
    """One polyline per named series over shared x labels (None: no point), with a legend; the axis starts at zero."""
    values = [v for _, vs in series for v in vs if v is not None]
    top = top if top is not None else _top(values)
    plot_w = width - LEFT - RIGHT
    plot_h = height - TOP - BOTTOM - 16  # room for the legend under the labels
    n = max(1, len(x_labels) - 1)

    def at(i: int, v: float) -> tuple[float, float]:
        return LEFT + plot_w * i / n, TOP + plot_h * (1 - v / top)

    inner = _axis(top, width=width, height=height - 16, unit=unit)
    every = max(1, math.ceil(len(x_labels) / 7))  # at most seven labels: a week's "MM-DD" needs the room
    for i, name in enumerate(x_labels):
        if i % every == 0:
            x, _ = at(i, 0)
            anchor = "end" if i == len(x_labels) - 1 else "start" if i == 0 else "middle"  # the edge labels stay inside
            inner.append(f'<text class="tick" x="{x:.1f}" y="{height - 16 - BOTTOM + 16}" text-anchor="{anchor}">{escape(name)}</text>')
    for k, (name, vs) in enumerate(series):
        points = [at(i, v) for i, v in enumerate(vs) if v is not None]
        if points:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
            inner.append(f'<polyline class="line series-{k % 4}" points="{path}"/>')
            inner.extend(f'<circle class="dot series-{k % 4}" cx="{x:.1f}" cy="{y:.1f}" r="2.5"/>' for x, y in points)
        lx = LEFT + k * 150
        inner.append(f'<rect class="bar series-{k % 4}" x="{lx}" y="{height - 12}" width="10" height="10"/>')
        inner.append(f'<text class="tick" x="{lx + 14}" y="{height - 3}">{escape(name)}</text>')
    return _frame(inner, width=width, height=height, label=label)


def sparkline(values: Sequence[float], *, label: str, top: float = 10.0, width: int = 120, height: int = 24) -> Markup:
    """A small line of ``values`` from 0 to ``top`` (heat is 0..10), the last point marked."""
    if not values:
        return Markup("")
    n = max(1, len(values) - 1)
    points = [(2 + (width - 4) * i / n, height - 2 - (height - 4) * min(v, top) / top) for i, v in enumerate(values)]
    path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
    x, y = points[-1]
    inner = [f'<polyline class="line series-0" points="{path}"/>', f'<circle class="dot series-0" cx="{x:.1f}" cy="{y:.1f}" r="2"/>']
    head = f'<svg class="spark" viewBox="0 0 {width} {height}" width="{width}" height="{height}" aria-hidden="true" focusable="false">'
    return Markup(head + f"<title>{escape(label)}</title>" + "".join(inner) + "</svg>")
