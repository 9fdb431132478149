"""Inline SVG plots for the HTML page (report/html/): pure functions from numbers to markup.

No plotting library and nothing fetched: each function returns one ``<svg>`` element that
a browser draws as it is, so the page stays self-contained and readable offline. Every
mark carries a ``<title>`` (the browser's tooltip) with the exact figure behind it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape
from typing import NamedTuple

CHAR_W = 6.6  # px per character of the 11px monospace labels
ROW_H = 15
FONT = 'font-family="monospace" font-size="11"'

# Verdict token -> (colour, marker shape) for the margin plot; colours match the page's legend.
MARKS = {"holds": ("#2e7d32", "circle"), "violated": ("#c62828", "cross"), "expected": ("#d98c00", "triangle"),
         "error": ("#6a1b9a", "square"), "not-applicable": ("#777", "diamond")}
BAR = {"holds": "#7cb87e", "violated": "#e57373", "expected": "#e8b64c", "error": "#9c7cc4",
       "not-applicable": "#b0b0b0", "": "#7a9cc6"}


class Point(NamedTuple):
    label: str
    value: float | str | None  # a float, "inf" (a failed exact check: "bitwise") or None (no checks)
    token: str
    title: str


class Bar(NamedTuple):
    label: str
    value: float
    token: str
    title: str
    href: str = ""


def _label(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "\u2026"


def _gutter(labels: Sequence[str], most: int) -> tuple[int, float]:
    chars = min(max((len(x) for x in labels), default=4), most)
    return chars, chars * CHAR_W + 10


def _marker(shape: str, x: float, y: float, colour: str) -> str:
    r = 4.5
    if shape == "circle":
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r}" fill="{colour}"/>'
    if shape == "square":
        return f'<rect x="{x - r:.1f}" y="{y - r:.1f}" width="{2 * r}" height="{2 * r}" fill="{colour}"/>'
    if shape == "triangle":
        return f'<path d="M{x:.1f} {y - r - 1:.1f}L{x + r + 1:.1f} {y + r:.1f}L{x - r - 1:.1f} {y + r:.1f}Z" fill="{colour}"/>'
    if shape == "diamond":
        return (f'<path d="M{x:.1f} {y - r - 1:.1f}L{x + r:.1f} {y:.1f}L{x:.1f} {y + r + 1:.1f}L{x - r:.1f} {y:.1f}Z" '
                f'fill="{colour}"/>')
    return (f'<path d="M{x - r:.1f} {y - r:.1f}L{x + r:.1f} {y + r:.1f}M{x + r:.1f} {y - r:.1f}L{x - r:.1f} {y + r:.1f}" '
            f'stroke="{colour}" stroke-width="2.5"/>')


def _decades(values: Sequence[float]) -> tuple[int, int]:
    """The log axis' range in powers of ten: always around 1 (the limit), at most 10^-20..10^20."""
    finite = [v for v in values if v > 0 and math.isfinite(v)]
    lo = min([math.floor(math.log10(v)) for v in finite] + [-1])
    hi = max([math.ceil(math.log10(v)) for v in finite] + [1])
    return max(lo, -20), min(hi, 20)


def margins(points: Sequence[Point], *, plot_w: int = 560) -> str:
    """One row per claim: its worst margin on a log scale, the limit 1 as a red line, the
    verdict as the marker. "bitwise" (an exact check failed) sits at the right edge, 0 at the left."""
    if not points:
        return ""
    numeric = [float(p.value) for p in points if isinstance(p.value, (int, float))]
    lo, hi = _decades(numeric)
    chars, left = _gutter([p.label for p in points], 48)
    top, right_pad = 34, 70
    width = left + plot_w + right_pad
    height = top + ROW_H * len(points) + 10

    def x_of(v: float) -> float:
        return left + plot_w * (min(max(math.log10(v), lo), hi) - lo) / (hi - lo)

    step = max(1, math.ceil((hi - lo) / 12))
    out = [f'<svg class="plot" id="margin-plot" role="img" width="{width:.0f}" height="{height}" '
           f'viewBox="0 0 {width:.0f} {height}" xmlns="http://www.w3.org/2000/svg" {FONT}>',
           "<title>worst margin per claim (observed error / tolerance, log scale); 1 is the limit</title>"]
    for k in range(lo, hi + 1, step):
        x = x_of(10.0**k)
        out.append(f'<line x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{height - 8}" stroke="#e3e3e3"/>'
                   f'<text x="{x:.1f}" y="{top - 8}" text-anchor="middle" fill="#555">1e{k}</text>')
    limit = x_of(1.0)
    out.append(f'<line x1="{limit:.1f}" y1="{top - 4}" x2="{limit:.1f}" y2="{height - 8}" stroke="#c62828" '
               f'stroke-width="1.5" stroke-dasharray="4 2"/><text x="{limit + 4:.1f}" y="12" fill="#c62828">'
               f"limit 1: above it the claim is violated</text>")
    for i, p in enumerate(points):
        y = top + ROW_H * i + ROW_H / 2
        colour, shape = MARKS.get(p.token, MARKS["holds"])
        out.append(f'<g class="pt" data-token="{p.token}"><title>{escape(p.title)}</title>'
                   f'<text x="{left - 8:.1f}" y="{y + 4:.1f}" text-anchor="end">{escape(_label(p.label, chars))}</text>'
                   f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#f2f2f2"/>')
        if p.value == "inf" or (isinstance(p.value, float) and math.isinf(p.value)):
            x, note = left + plot_w + 8, "bitwise"
        elif isinstance(p.value, (int, float)):
            v = float(p.value)
            x = x_of(v) if v > 0 else left
            note = "0" if v <= 0 else (f"{v:.2g}" if v > 10.0**hi or v < 10.0**lo else "")
        else:
            out.append("</g>")
            continue
        out.append(_marker(shape, x, y, colour))
        if note:
            out.append(f'<text x="{x + 8:.1f}" y="{y + 4:.1f}" fill="#555">{note}</text>')
        out.append("</g>")
    out.append("</svg>")
    return "".join(out)


def legend(tokens: Mapping[str, str]) -> str:
    """A line of marker swatches: token -> words."""
    items = []
    for token, words in tokens.items():
        colour, shape = MARKS[token]
        items.append(f'<span class="mark"><svg width="14" height="14" viewBox="0 0 14 14">{_marker(shape, 7, 7, colour)}'
                     f"</svg> {escape(words)}</span>")
    return '<p class="plot-legend">' + " ".join(items) + "</p>"


def bars(items: Sequence[Bar], *, ident: str, unit: str = "s", plot_w: int = 420, most_chars: int = 70) -> str:
    """Horizontal bars, one row per item, the value written after each bar."""
    if not items:
        return ""
    chars, left = _gutter([b.label for b in items], most_chars)
    top = 6
    width = left + plot_w + 80
    height = top + ROW_H * len(items) + 6
    biggest = max((b.value for b in items), default=0) or 1.0
    out = [f'<svg class="plot" id="{ident}" role="img" width="{width:.0f}" height="{height}" '
           f'viewBox="0 0 {width:.0f} {height}" xmlns="http://www.w3.org/2000/svg" {FONT}>']
    for i, b in enumerate(items):
        y = top + ROW_H * i
        w = max(plot_w * b.value / biggest, 1.0)
        text = f'<text x="{left - 8:.1f}" y="{y + 11}" text-anchor="end">{escape(_label(b.label, chars))}</text>'
        if b.href:
            text = f'<a href="{escape(b.href)}">{text}</a>'
        out.append(f'<g class="bar"><title>{escape(b.title)}</title>{text}'
                   f'<rect x="{left}" y="{y + 2}" width="{w:.1f}" height="{ROW_H - 4}" fill="{BAR.get(b.token, BAR[""])}"/>'
                   f'<text x="{left + w + 5:.1f}" y="{y + 11}" fill="#444">{b.value:.3g} {unit}</text></g>')
    out.append("</svg>")
    return "".join(out)


def heatmap(rows: Sequence[str], columns: Sequence[str], cells: Mapping[tuple[str, str], float],
            titles: Mapping[str, str], *, ident: str, cell_w: int = 16, cell_h: int = 13) -> str:
    """Rows x columns; a cell's fraction (0..1) is its colour: green all visited, red none,
    amber in between; no cell where the pair does not exist. The column labels stand slanted.
    A row's cells of one colour are one path (a hundred rows by twenty columns stay small),
    and the row's ``titles`` entry is its tooltip."""
    if not rows or not columns:
        return ""
    chars, left = _gutter(rows, 40)
    longest = max(len(c) for c in columns)
    top = int(longest * CHAR_W * 0.87) + 12  # the labels stand at 60 degrees
    width = left + cell_w * len(columns) + longest * CHAR_W * 0.5 + 10
    height = top + cell_h * len(rows) + 4
    out = [f'<svg class="plot heat" id="{ident}" role="img" width="{width:.0f}" height="{height}" '
           f'viewBox="0 0 {width:.0f} {height}" xmlns="http://www.w3.org/2000/svg" {FONT}>']
    for j, col in enumerate(columns):
        x = left + cell_w * j + cell_w / 2
        out.append(f'<text transform="translate({x + 3:.1f} {top - 4}) rotate(-60)">{escape(col)}</text>')
    for i, row in enumerate(rows):
        y = top + cell_h * i
        paths: dict[str, list[str]] = {}
        for j, col in enumerate(columns):
            if (row, col) in cells:
                paths.setdefault(_heat(cells[(row, col)]), []).append(
                    f"M{left + cell_w * j:.0f} {y}h{cell_w - 1}v{cell_h - 1}h{1 - cell_w}z")
        shapes = "".join(f'<path d="{"".join(d)}" fill="{colour}"/>' for colour, d in paths.items())
        out.append(f'<g class="heat-row"><title>{escape(titles.get(row, row))}</title><rect x="0" y="{y}" '
                   f'width="{left + cell_w * len(columns):.0f}" height="{cell_h}" fill="transparent"/>'
                   f'<text x="{left - 6:.1f}" y="{y + cell_h - 3}" text-anchor="end">{escape(_label(row, chars))}</text>'
                   f"{shapes}</g>")
    out.append("</svg>")
    return "".join(out)


HEAT_LEGEND = (("#4caf50", "all"), ("#f0b429", "half or more"), ("#f57c00", "less"), ("#e53935", "none"))


def _heat(fraction: float) -> str:
    if fraction >= 1:
        return HEAT_LEGEND[0][0]
    if fraction <= 0:
        return HEAT_LEGEND[3][0]
    return HEAT_LEGEND[1][0] if fraction >= 0.5 else HEAT_LEGEND[2][0]
