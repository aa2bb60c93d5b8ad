"""Charts as inline SVG, drawn on the server: no script, no library, nothing to fetch.

Each chart is an ``<svg role="img">`` with a ``<title>`` and a ``<desc>`` that say in words what
it shows (a screen reader reads those; the page puts the same figures in a table beside it).
Colours come from the stylesheet through class names (``c0`` ... ``c7``, one per category in
the order given), so the page's Content-Security-Policy needs no inline style. The ``viewBox``
scales the drawing to the width it is given: the same chart fits 360 px and a desktop.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from html import escape

from markupsafe import Markup

PALETTE = 8
WIDTH = 720
HEIGHT = 220
LEFT = 40  # room for the y axis' labels
BOTTOM = 24  # room for the x axis' labels
TOP = 10


def _nice_max(value: int) -> int:
    """A round top for the y axis at or above ``value`` (1, 2, 5, 10, 20, 50, ...)."""
    if value <= 2:
        return 2  # so the middle line is a whole number too
    step = 1
    while True:
        for m in (1, 2, 5):
            if step * m >= value:
                return step * m
        step *= 10


def _svg(label_id: str, title: str, desc: str, body: list[str]) -> Markup:
    head = (
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-labelledby="{label_id}-t {label_id}-d" preserveAspectRatio="xMidYMid meet" '
        'xmlns="http://www.w3.org/2000/svg">'
        f'<title id="{label_id}-t">{escape(title)}</title>'
        f'<desc id="{label_id}-d">{escape(desc)}</desc>'
    )
    return Markup(head + "".join(body) + "</svg>")


def _axes(top: int, ticks_at: Sequence[tuple[float, str]]) -> list[str]:
    plot_h = HEIGHT - BOTTOM - TOP
    out = []
    for frac in (0.0, 0.5, 1.0):
        y = TOP + plot_h * (1 - frac)
        value = f"{top * frac:g}"
        out.append(f'<line class="grid" x1="{LEFT}" x2="{WIDTH}" y1="{y:.1f}" y2="{y:.1f}"/>')
        out.append(
            f'<text class="axis" x="{LEFT - 4}" y="{y + 4:.1f}" text-anchor="end">{value}</text>'
        )
    for x, label in ticks_at:
        out.append(
            f'<text class="axis" x="{x:.1f}" y="{HEIGHT - 6}" text-anchor="middle">'
            f"{escape(label)}</text>"
        )
    return out


def bars(
    label_id: str, title: str, points: Sequence[tuple[dt.datetime, int]], every: int = 10
) -> Markup:
    """One bar per point (a minute, an hour), labelled ``HH:MM`` every ``every`` points."""
    n = max(1, len(points))
    top = _nice_max(max((v for _, v in points), default=0))
    plot_w, plot_h = WIDTH - LEFT, HEIGHT - BOTTOM - TOP
    slot = plot_w / n
    body: list[str] = []
    ticks = [
        (LEFT + slot * (i + 0.5), at.strftime("%H:%M"))
        for i, (at, _) in enumerate(points)
        if i % every == 0
    ]
    body += _axes(top, ticks)
    for i, (at, v) in enumerate(points):
        if not v:
            continue
        h = plot_h * v / top
        x = LEFT + slot * i + slot * 0.1
        body.append(
            f'<rect class="c0" x="{x:.1f}" y="{TOP + plot_h - h:.1f}" width="{slot * 0.8:.1f}" '
            f'height="{h:.1f}"><title>{at:%H:%M} UTC: {v}</title></rect>'
        )
    total = sum(v for _, v in points)
    peak = max(points, key=lambda p: p[1], default=None)
    if peak is None or not peak[1]:
        desc = "None in this period."
    else:
        desc = f"{total} in all; the most, {peak[1]}, at {peak[0]:%H:%M} UTC."
    return _svg(label_id, title, desc, body)


def stacked(
    label_id: str,
    title: str,
    hours: Sequence[dt.datetime],
    categories: Sequence[str],
    counts: Mapping[dt.datetime, Mapping[str, int]],
) -> Markup:
    """One bar per hour, stacked by category (class ``c<i>`` for the i-th category)."""
    n = max(1, len(hours))
    totals = [sum(counts.get(h, {}).values()) for h in hours]
    top = _nice_max(max(totals, default=0))
    plot_w, plot_h = WIDTH - LEFT, HEIGHT - BOTTOM - TOP
    slot = plot_w / n
    ticks = [(LEFT + slot * (i + 0.5), f"{h:%H}h") for i, h in enumerate(hours) if i % 3 == 0]
    body = _axes(top, ticks)
    for i, h in enumerate(hours):
        y: float = TOP + plot_h
        for ci, cat in enumerate(categories):
            v = counts.get(h, {}).get(cat, 0)
            if not v:
                continue
            bar_h = plot_h * v / top
            y -= bar_h
            body.append(
                f'<rect class="c{ci % PALETTE}" x="{LEFT + slot * i + slot * 0.1:.1f}" '
                f'y="{y:.1f}" width="{slot * 0.8:.1f}" height="{bar_h:.1f}">'
                f"<title>{h:%H}:00 UTC, {escape(cat)}: {v}</title></rect>"
            )
    total = sum(totals)
    if not total:
        desc = "Nothing pending in the next 24 hours."
    else:
        peak = max(range(len(hours)), key=lambda i: totals[i])
        per_cat = ", ".join(
            f"{c} {sum(counts.get(h, {}).get(c, 0) for h in hours)}" for c in categories
        )
        desc = (
            f"{total} pending in all ({per_cat}); the busiest hour is "
            f"{hours[peak]:%H}:00 UTC with {totals[peak]}."
        )
    return _svg(label_id, title, desc, body)
