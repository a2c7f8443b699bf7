"""Hand-written inline SVG for the report: per-env success sparklines and the diversity map.

Plain SVG strings (no matplotlib): a few hundred envs render in milliseconds and a few hundred bytes each, and the
map places a label only where it overlaps no other label (every point keeps its name as a hover title).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from gymverse.evaluate.schema import DiversityResult, EnvEvaluation

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22")
CHAR_W, LABEL_H = 5.6, 10.0


def _e(value: Any) -> str:
    return html.escape(str(value))


def colors(names: Sequence[str]) -> dict[str, str]:
    """A stable colour per name (policy or domain)."""
    return {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(names)}


def sparkline(ev: EnvEvaluation, policy_colors: dict[str, str], width: int = 150, height: int = 44) -> str:
    """Success rate (0..1) against level (1..10), one polyline per policy; empty string when no level was measured."""
    curves = [(p, pd) for p, pd in ev.difficulty.items() if pd.levels]
    if not curves:
        return ""
    pad = 4.0

    def xy(level: int, rate: float) -> str:
        x = pad + (level - 1) / 9 * (width - 2 * pad)
        y = height - pad - rate * (height - 2 * pad)
        return f"{x:.1f},{y:.1f}"

    parts = [
        f'<svg class="spark" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="success rate by level for {_e(ev.name)}">',
        f'<rect x="0.5" y="0.5" width="{width - 1}" height="{height - 1}" fill="#fafafa" stroke="#ddd"/>',
    ]
    for policy, pd in curves:
        pts = " ".join(xy(lv.level, lv.rate) for lv in pd.levels)
        color = policy_colors.get(policy, "#444")
        tip = ", ".join(f"L{lv.level} {lv.rate:.0%}" for lv in pd.levels)
        parts.append(
            f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="1.5">'
            f"<title>{_e(policy)}: {tip}</title></polyline>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _overlaps(box: tuple[float, float, float, float], placed: list[tuple[float, float, float, float]]) -> bool:
    x0, y0, x1, y1 = box
    return any(not (x1 <= a0 or a1 <= x0 or y1 <= b0 or b1 <= y0) for a0, b0, a1, b1 in placed)


def diversity_map(div: DiversityResult, width: int = 760, height: int = 460) -> str:
    """Scatter of the 2-D PCA map coloured by domain; labels only where they collide with no other label."""
    if not div.map:
        return ""
    pad = 30.0
    xs = [float(p["x"]) for p in div.map]
    ys = [float(p["y"]) for p in div.map]
    x_lo, x_hi = min(xs), max(xs)
    y_lo, y_hi = min(ys), max(ys)
    sx = (width - 2 * pad) / ((x_hi - x_lo) or 1.0)
    sy = (height - 2 * pad) / ((y_hi - y_lo) or 1.0)
    domains = sorted({str(p["domain"]) for p in div.map})
    dom_color = colors(domains)
    points, labels = [], []
    placed: list[tuple[float, float, float, float]] = []
    pts = [(pad + (x - x_lo) * sx, height - pad - (y - y_lo) * sy, p) for x, y, p in zip(xs, ys, div.map)]
    for cx, cy, _ in pts:  # points are obstacles too
        placed.append((cx - 3, cy - 3, cx + 3, cy + 3))
    for cx, cy, p in pts:
        name = str(p["name"])
        points.append(
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="3.5" fill="{dom_color[str(p["domain"])]}">'
            f"<title>{_e(name)} ({_e(p['domain'])})</title></circle>"
        )
        short = name.split(":", 1)[-1][:28]
        w = CHAR_W * len(short)
        for dx, dy in ((5, -4), (5, 12), (-5 - w, -4), (-5 - w, 12)):
            box = (cx + dx, cy + dy - LABEL_H + 2, cx + dx + w, cy + dy + 2)
            if box[0] >= 0 and box[2] <= width and box[1] >= 0 and box[3] <= height and not _overlaps(box, placed):
                placed.append(box)
                labels.append(f'<text x="{cx + dx:.1f}" y="{cy + dy:.1f}">{_e(short)}</text>')
                break
    legend = "".join(
        f'<g transform="translate({pad + 110 * i:.0f},14)"><circle r="4" fill="{dom_color[d]}"/>'
        f'<text x="8" y="4">{_e(d)}</text></g>'
        for i, d in enumerate(domains)
    )
    return (
        f'<svg class="map" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="diversity map">'
        f'<rect x="0.5" y="0.5" width="{width - 1}" height="{height - 1}" fill="#fff" stroke="#ccc"/>'
        f'<g font-size="9" fill="#333">{"".join(points)}{"".join(labels)}</g>'
        f'<g font-size="11">{legend}</g>'
        f'<text x="{width / 2:.0f}" y="{height - 6}" font-size="11" text-anchor="middle">PC 1</text>'
        f'<text x="10" y="{height / 2:.0f}" font-size="11" transform="rotate(-90 10 {height / 2:.0f})" '
        f'text-anchor="middle">PC 2</text></svg>'
    )


__all__ = ["colors", "diversity_map", "sparkline"]
