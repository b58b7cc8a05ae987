"""Small inline SVG charts for the run report: no plotting library, no network, one file."""

from __future__ import annotations

from html import escape

W, H, PAD_L, PAD_R, PAD_T, PAD_B = 520, 240, 48, 16, 28, 36
COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2"]


def _scale(lo: float, hi: float, a: float, b: float):
    span = (hi - lo) or 1.0
    return lambda v: a + (v - lo) / span * (b - a)


def line_chart(
    title: str,
    series: dict[str, list[tuple[float, float]]],
    bands: dict[str, list[tuple[float, float, float]]] | None = None,
    y_range: tuple[float, float] | None = None,
    y_label: str = "",
    x_label: str = "step",
    percent: bool = False,
) -> str:
    """Lines (x, y) per series name; optional (x, low, high) bands drawn under the line of the same name."""
    bands = bands or {}
    xs = [x for pts in series.values() for x, _ in pts] or [0.0, 1.0]
    ys = [y for pts in series.values() for _, y in pts] + [
        v for b in bands.values() for _, lo, hi in b for v in (lo, hi)
    ]
    x0, x1 = min(xs), max(xs)
    if x0 == x1:
        x0, x1 = x0 - 1, x1 + 1
    y0, y1 = y_range or ((min(ys), max(ys)) if ys else (0.0, 1.0))
    if y0 == y1:
        y0, y1 = y0 - 1, y1 + 1
    sx = _scale(x0, x1, PAD_L, W - PAD_R)
    sy = _scale(y0, y1, H - PAD_B, PAD_T)
    out = [f'<svg viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" aria-label="{escape(title)}">']
    out.append(f'<text x="{W / 2}" y="16" text-anchor="middle" font-weight="bold">{escape(title)}</text>')
    for i in range(5):  # horizontal grid + y ticks
        v = y0 + (y1 - y0) * i / 4
        y = sy(v)
        label = f"{v:.0%}" if percent else f"{v:.2g}"
        out.append(f'<line x1="{PAD_L}" x2="{W - PAD_R}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e5e7eb"/>')
        out.append(f'<text x="{PAD_L - 4}" y="{y + 4:.1f}" text-anchor="end" font-size="10">{label}</text>')
    for x in sorted(set(xs))[:: max(1, len(set(xs)) // 10)]:
        out.append(
            f'<text x="{sx(x):.1f}" y="{H - PAD_B + 14}" text-anchor="middle" font-size="10">{x:g}</text>'
        )
    out.append(f'<text x="{W / 2}" y="{H - 4}" text-anchor="middle" font-size="11">{escape(x_label)}</text>')
    if y_label:
        out.append(
            f'<text x="12" y="{H / 2}" font-size="11" transform="rotate(-90 12 {H / 2})" text-anchor="middle">{escape(y_label)}</text>'
        )
    for k, (name, pts) in enumerate(series.items()):
        color = COLORS[k % len(COLORS)]
        band = sorted(bands.get(name, []))
        if band:
            upper = " ".join(f"{sx(x):.1f},{sy(hi):.1f}" for x, _, hi in band)
            lower = " ".join(f"{sx(x):.1f},{sy(lo):.1f}" for x, lo, _ in reversed(band))
            out.append(
                f'<polygon points="{upper} {lower}" fill="{color}" fill-opacity="0.15" stroke="none"/>'
            )
        pts = sorted(pts)
        if pts:
            path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
            out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
            for x, y in pts:
                out.append(
                    f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" fill="{color}"><title>{escape(name)} {x:g}: {y:.3g}</title></circle>'
                )
        out.append(
            f'<text x="{PAD_L + 8 + 120 * k}" y="{PAD_T + 10}" fill="{color}" font-size="11">{escape(name)}</text>'
        )
    out.append("</svg>")
    return "\n".join(out)


def bar_chart(title: str, bars: dict[str, dict[str, float]], percent: bool = False) -> str:
    """Stacked horizontal bars: {row label: {part name: value}}."""
    rows = list(bars.items())
    parts = list(dict.fromkeys(p for _, d in rows for p in d))
    height = PAD_T + 22 * max(1, len(rows)) + 30
    total = max([sum(d.values()) for _, d in rows] + [1e-9])
    left = 150
    sx = _scale(0, total, left, W - PAD_R)
    out = [
        f'<svg viewBox="0 0 {W} {height}" width="{W}" height="{height}" role="img" aria-label="{escape(title)}">'
    ]
    out.append(f'<text x="{W / 2}" y="16" text-anchor="middle" font-weight="bold">{escape(title)}</text>')
    for i, (label, d) in enumerate(rows):
        y = PAD_T + 22 * i
        out.append(
            f'<text x="{left - 6}" y="{y + 13}" text-anchor="end" font-size="11">{escape(label[:22])}</text>'
        )
        x = float(left)
        for k, p in enumerate(parts):
            v = d.get(p, 0.0)
            w = sx(v) - left
            color = COLORS[k % len(COLORS)]
            shown = f"{v:.0%}" if percent else f"{v:.3g}"
            out.append(
                f'<rect x="{x:.1f}" y="{y}" width="{max(w, 0):.1f}" height="16" fill="{color}"><title>{escape(p)}: {shown}</title></rect>'
            )
            x += w
        shown_total = f"{sum(d.values()):.0%}" if percent else f"{sum(d.values()):.3g}"
        out.append(f'<text x="{x + 4:.1f}" y="{y + 13}" font-size="10">{shown_total}</text>')
    for k, p in enumerate(parts):
        out.append(
            f'<text x="{left + 110 * k}" y="{height - 8}" fill="{COLORS[k % len(COLORS)]}" font-size="11">{escape(p)}</text>'
        )
    out.append("</svg>")
    return "\n".join(out)
