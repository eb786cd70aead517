"""Server-rendered SVG charts for the result pages: no JavaScript, no CDN.

Each chart is an ``<svg role="img">`` with a ``<title>`` and a ``<desc>`` that states the
figures in words (screen readers read those, not the bars), and a ``<title>`` per bar for
the tooltip. Every piece of text goes through :func:`django.utils.html.escape`: deployment
names and challenge keys come from users. Inputs are the stored aggregates (bucket counts),
never rows, so drawing costs the same for a run of any size.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from grading.engine.aggregate import LatencyHistogram

_ids = itertools.count(1)

SCORE_BINS = 10
STATUS_COLOURS = {
    "PASSED": "#1a7f37",
    "FAILED": "#b42318",
    "UNAVAILABLE": "#b7791f",
    "NOT_EVALUATED": "#8792a2",
    "ERROR": "#7a2e9c",
    "infra_error": "#7a2e9c",
    "config_error": "#a23c8c",
    "cancelled": "#aab3bf",
    "running": "#2454c5",
    "pending": "#d9dee6",
}


def _fmt(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def score_bin(score: float) -> int:
    """The bin (0..9) of a score in [0, 1]: [0, 0.1), ..., [0.9, 1.0]."""
    return min(SCORE_BINS - 1, max(0, int(score * SCORE_BINS)))


def score_bin_labels() -> list[str]:
    return [f"{i / SCORE_BINS:.1f}–{(i + 1) / SCORE_BINS:.1f}" for i in range(SCORE_BINS)]


def format_ms(ms: float) -> str:
    """A latency for people: enough digits to tell neighbouring values and latency buckets
    apart (the buckets are ~19% wide: whole milliseconds read "2 ms–2 ms" below 10 ms)."""
    if ms < 1:
        return f"{ms:.2f} ms"
    if ms < 10:
        return f"{ms:.1f} ms"
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    return f"{ms / 60_000:.1f} min"


def histogram_svg(
    counts: Sequence[int],
    labels: Sequence[str],
    *,
    title: str,
    unit: str = "cases",
    colour: str = "#2454c5",
    width: int = 320,
    height: int = 120,
) -> SafeString:
    """Vertical bars, one per bin; the first and last labels are drawn under the axis."""
    if len(counts) != len(labels):
        raise ValueError("counts and labels must have the same length")
    uid = next(_ids)
    total = sum(counts)
    top = max(counts, default=0) or 1
    n = max(1, len(counts))
    plot_h = height - 22
    bar_w = width / n
    parts = [
        f'<svg class="chart" viewBox="0 0 {width} {height}" width="100%" role="img" '
        f'aria-labelledby="chart{uid}t chart{uid}d" preserveAspectRatio="xMidYMid meet">',
        f'<title id="chart{uid}t">{escape(title)}</title>',
    ]
    described = ", ".join(f"{escape(lab)}: {c}" for lab, c in zip(labels, counts, strict=True) if c)
    parts.append(f'<desc id="chart{uid}d">{total} {escape(unit)}. {described or "no data"}.</desc>')
    parts.append(f'<line x1="0" y1="{plot_h}" x2="{width}" y2="{plot_h}" stroke="#8792a2" stroke-width="1"/>')
    if not total:  # empty axes alone read as a drawing that failed
        parts.append(
            f'<text x="{width / 2}" y="{plot_h / 2}" font-size="12" fill="#5b6677" '
            'text-anchor="middle" aria-hidden="true">no data</text>'
        )
    for i, (count, label) in enumerate(zip(counts, labels, strict=True)):
        h = round(plot_h * count / top, 1) if count else 0
        x = round(i * bar_w + 1, 1)
        parts.append(
            f'<rect x="{x}" y="{round(plot_h - h, 1)}" width="{round(bar_w - 2, 1)}" height="{h}" '
            f'fill="{colour}"><title>{escape(label)}: {count} {escape(unit)}</title></rect>'
        )
    if labels:
        parts.append(f'<text x="0" y="{height - 6}" font-size="10" fill="#5b6677">{escape(labels[0])}</text>')
        parts.append(
            f'<text x="{width}" y="{height - 6}" font-size="10" fill="#5b6677" '
            f'text-anchor="end">{escape(labels[-1])}</text>'
        )
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 - every text above is escaped


def has_scores(counts: Sequence[int]) -> bool:
    """Whether a lane's stored score bins hold any scored case (else there is nothing to draw)."""
    return any(counts[:SCORE_BINS])


def score_histogram_svg(counts: Sequence[int], *, deployment: str) -> SafeString:
    """The score distribution of one lane from its stored 10-bin counts."""
    padded = list(counts[:SCORE_BINS]) + [0] * (SCORE_BINS - len(counts))
    return histogram_svg(
        padded, score_bin_labels(), title=f"Score distribution of {deployment}", colour="#2454c5"
    )


def _latency_bucket_label(index: int) -> str:
    low, high = LatencyHistogram.bounds(index)
    if index < 0:  # everything below the first bucket, down to 0
        return f"under {format_ms(high)}"
    return f"{format_ms(low)}–{format_ms(high)}"


def latency_histogram_svg(
    histogram: LatencyHistogram | Mapping[str, Any] | None, *, deployment: str
) -> SafeString:
    """The stored log-bucket latency histogram, from its lowest to its highest used bucket."""
    hist = histogram if isinstance(histogram, LatencyHistogram) else LatencyHistogram.from_dict(histogram)
    used = sorted(i for i, c in hist.counts.items() if c > 0)
    if not used:
        return histogram_svg([], [], title=f"Latency of {deployment}: no data", unit="executions")
    indexes = range(used[0], used[-1] + 1)
    counts = [hist.counts.get(i, 0) for i in indexes]
    labels = [_latency_bucket_label(i) for i in indexes]
    return histogram_svg(
        counts, labels, title=f"Latency of {deployment}", unit="executions", colour="#5b6677"
    )


# Item states that are not finished work: still to do, or never to be done (a cancelled item
# was not executed, so counting it as finished read "8 of 8 items finished" for a run cancelled
# after 3).
UNFINISHED_STATES = frozenset({"pending", "running", "cancelled"})


def finished_items(segments: Mapping[str, int]) -> int:
    """The items that finished (graded, or ended with an infra or config error)."""
    return sum(v for k, v in segments.items() if k not in UNFINISHED_STATES)


def progress_svg(
    segments: Mapping[str, int], total: int, *, width: int = 600, height: int = 14
) -> SafeString:
    """A stacked bar of item states (PASSED, FAILED, ..., running, pending) over ``total``."""
    uid = next(_ids)
    done = finished_items(segments)
    percent = 100.0 * done / total if total else 100.0
    parts = [
        f'<svg class="progress" viewBox="0 0 {width} {height}" width="100%" height="{height}" '
        f'role="img" aria-labelledby="prog{uid}" preserveAspectRatio="none">',
        f'<title id="prog{uid}">{done} of {total} items finished ({_fmt(percent)}%)'
        + "".join(f", {escape(k)} {v}" for k, v in segments.items() if v)
        + "</title>",
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#eceff3"/>',
    ]
    x = 0.0
    for state, count in segments.items():
        if not count or not total:
            continue
        w = width * count / total
        colour = STATUS_COLOURS.get(state, "#8792a2")
        parts.append(
            f'<rect x="{round(x, 2)}" y="0" width="{round(w, 2)}" height="{height}" fill="{colour}">'
            f"<title>{escape(state)}: {count}</title></rect>"
        )
        x += w
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 - every text above is escaped
