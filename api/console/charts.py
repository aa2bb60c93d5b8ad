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
HEIGHT = 230
# Room for the axes' labels at their largest: the stylesheet draws them bigger on a narrow
# screen (26 units at 360 px, where the drawing is scaled to about half), so they stay about
# 12 px tall there.
DIGIT_UNITS = 17  # a digit's width at that size (a point is narrower)
BOTTOM = 54
TOP = 16


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


def _left(top: int) -> int:
    """Where the plot starts: room for the widest y label (``top`` or its half) at its
    largest."""
    return max(40, 10 + DIGIT_UNITS * max(len(f"{top:g}"), len(f"{top * 0.5:g}")))


def _axes(top: int, left: int, ticks_at: Sequence[tuple[float, str]]) -> list[str]:
    plot_h = HEIGHT - BOTTOM - TOP
    out = []
    for frac in (0.0, 0.5, 1.0):
        y = TOP + plot_h * (1 - frac)
        value = f"{top * frac:g}"
        out.append(f'<line class="grid" x1="{left}" x2="{WIDTH}" y1="{y:.1f}" y2="{y:.1f}"/>')
        out.append(
            f'<text class="axis" x="{left - 5}" y="{y:.1f}" dy="0.35em" text-anchor="end">'
            f"{value}</text>"
        )
    for x, label in ticks_at:
        half = DIGIT_UNITS * len(label) / 2  # kept whole inside the drawing at either end
        x = min(max(x, left / 2 + half), WIDTH - half)
        out.append(
            f'<text class="axis" x="{x:.1f}" y="{HEIGHT - 10}" text-anchor="middle">'
            f"{escape(label)}</text>"
        )
    return out


def bars(
    label_id: str, title: str, points: Sequence[tuple[dt.datetime, int]], every: int = 10
) -> Markup:
    """One bar per point (a minute, an hour), labelled ``HH:MM`` every ``every`` points."""
    n = max(1, len(points))
    top = _nice_max(max((v for _, v in points), default=0))
    left = _left(top)
    plot_w, plot_h = WIDTH - left, HEIGHT - BOTTOM - TOP
    slot = plot_w / n
    body: list[str] = []
    ticks = [
        (left + slot * (i + 0.5), at.strftime("%H:%M"))
        for i, (at, _) in enumerate(points)
        if i % every == 0
    ]
    body += _axes(top, left, ticks)
    for i, (at, v) in enumerate(points):
        if not v:
            continue
        h = plot_h * v / top
        x = left + slot * i + slot * 0.1
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
    left = _left(top)
    plot_w, plot_h = WIDTH - left, HEIGHT - BOTTOM - TOP
    slot = plot_w / n
    ticks = [(left + slot * (i + 0.5), f"{h:%H}h") for i, h in enumerate(hours) if i % 3 == 0]
    body = _axes(top, left, ticks)
    for i, h in enumerate(hours):
        y: float = TOP + plot_h
        for ci, cat in enumerate(categories):
            v = counts.get(h, {}).get(cat, 0)
            if not v:
                continue
            bar_h = plot_h * v / top
            y -= bar_h
            body.append(
                f'<rect class="c{ci % PALETTE}" x="{left + slot * i + slot * 0.1:.1f}" '
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
