"""Charts drawn on the server as SVG: no chart library to vendor, nothing to download, and
the page reads the same with scripts off."""

from __future__ import annotations

from html import escape
from typing import Sequence

COLOURS = ("#3b82f6", "#f59e0b", "#10b981", "#ef4444")


def grouped_bars(categories: Sequence[str], series: dict[str, Sequence[float]],
                 width: int = 900, height: int = 260, title: str = "") -> str:
    """Vertical bars, one group per category and one bar per series, with a legend and the
    largest value on the axis."""
    if not categories:
        return '<p class="muted">No data yet.</p>'
    top = max((v for values in series.values() for v in values), default=0) or 1
    left, bottom, plot_h = 60, 40, height - 70
    group_w = (width - left - 10) / len(categories)
    bar_w = max(group_w * 0.8 / max(len(series), 1), 1)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'role="img" aria-label="{escape(title)}" class="chart">',
             f'<text x="{left}" y="14" font-size="12">{escape(title)}</text>',
             f'<line x1="{left}" y1="{height - bottom}" x2="{width - 10}" '
             f'y2="{height - bottom}" stroke="#9aa3b2"/>',
             f'<text x="{left - 6}" y="{height - bottom - plot_h + 4}" font-size="11" '
             f'text-anchor="end">{top:,.0f}</text>']
    for i, category in enumerate(categories):
        x0 = left + i * group_w + group_w * 0.1
        for j, (name, values) in enumerate(series.items()):
            value = values[i]
            h = plot_h * value / top
            parts.append(f'<rect x="{x0 + j * bar_w:.1f}" y="{height - bottom - h:.1f}" '
                         f'width="{bar_w:.1f}" height="{h:.1f}" '
                         f'fill="{COLOURS[j % len(COLOURS)]}"><title>{escape(name)} '
                         f'{escape(category)}: {value:,.0f}</title></rect>')
        if len(categories) <= 31:
            parts.append(f'<text x="{x0 + group_w * 0.4:.1f}" y="{height - bottom + 14}" '
                         f'font-size="10" text-anchor="middle">{escape(category[-5:])}</text>')
    for j, name in enumerate(series):
        x = left + j * 200
        parts.append(f'<rect x="{x}" y="{height - 16}" width="10" height="10" '
                     f'fill="{COLOURS[j % len(COLOURS)]}"/><text x="{x + 14}" '
                     f'y="{height - 7}" font-size="11">{escape(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def meter(fraction: float | None) -> str:
    """A small horizontal bar for a share between 0 and 1, with its percentage."""
    if fraction is None:
        return "–"
    percent = max(0.0, min(fraction, 1.0)) * 100
    return (f'<div class="bar" style="width:160px;display:inline-block;vertical-align:middle">'
            f'<span style="width:{percent:.0f}%"></span></div> {percent:.0f}%')
