"""Formatting filters of the result pages: percentages, intervals, durations, money,
evidence-id anchors and dictionary lookups. Every filter returns plain text (autoescaped)."""

from __future__ import annotations

from typing import Any

from django import template

from runs.charts import format_ms
from runs.lane_settings import shown_url as _shown_url
from runs.transcript import anchor_for

register = template.Library()
DASH = "–"


@register.filter
def shown_url(value: Any) -> str:
    """A deployment URL for a page: the values of query parameters named like credentials
    (``?code=``, ``?api_key=``) elided, as the run page shows it."""
    return _shown_url(value) if isinstance(value, str) else ""


@register.filter
def pct(value: Any, digits: int = 1) -> str:
    """0.756 -> "75.6%"; None -> "–"."""
    if value is None or isinstance(value, bool):
        return DASH
    try:
        return f"{float(value) * 100:z.{int(digits)}f}%"
    except (TypeError, ValueError):
        return DASH


@register.filter
def interval(value: Any) -> str:
    """[0.62, 0.84] -> "62.0–84.0%"; scores use :func:`score_interval`."""
    if not value or len(value) != 2 or value[0] is None:
        return ""
    return f"{value[0] * 100:z.1f}{DASH}{value[1] * 100:z.1f}%"


@register.filter
def score_interval(value: Any) -> str:
    """[0.25, 1.0] -> "0.2500–1.0000": 4 decimals, as the score beside it and the run
    document show them (grading.md §2)."""
    if not value or len(value) != 2 or value[0] is None:
        return ""
    return f"{value[0]:z.4f}{DASH}{value[1]:z.4f}"


@register.filter
def score(value: Any) -> str:
    """Scores show 4 decimals (grading.md §2); what rounds to zero shows 0.0000, never
    -0.0000 (format's ``z``: a delta of floating noise is not a regression)."""
    if value is None or isinstance(value, bool):
        return DASH
    try:
        return f"{float(value):z.4f}"
    except (TypeError, ValueError):
        return DASH


def _signed(value: float, scale: float, digits: int, unit: str) -> str:
    """A signed figure at ``digits`` decimals; one too small to show is "+<0.0001", never a
    bare 0 next to an "improved" or "regressed" verdict that saw it."""
    shown = value * scale
    if value == 0:
        return f"0.{'0' * digits}{unit}"
    smallest = 10**-digits
    if abs(shown) < smallest / 2:
        return f"{'+' if value > 0 else '−'}<{smallest:.{digits}f}{unit}"
    return f"{shown:+.{digits}f}{unit}".replace("-", "−")


@register.filter
def delta_pct(value: Any) -> str:
    """A pass-rate difference: 0.0123 -> "+1.2 pp" ("pp": percentage points)."""
    if value is None or isinstance(value, bool):
        return DASH
    return _signed(float(value), 100, 1, " pp")


@register.filter
def delta_score(value: Any) -> str:
    """A mean-score difference: 0.01234 -> "+0.0123"."""
    if value is None or isinstance(value, bool):
        return DASH
    return _signed(float(value), 1, 4, "")


@register.filter
def delta_interval(value: Any, kind: str = "score") -> str:
    """The 95% interval of a difference, as its figure (``kind`` "pct" or "score")."""
    if not value or len(value) != 2 or value[0] is None:
        return ""
    show = delta_pct if kind == "pct" else delta_score
    return f"{show(value[0])} to {show(value[1])}"


@register.filter
def ms(value: Any) -> str:
    if value is None:
        return DASH
    try:
        return format_ms(float(value))
    except (TypeError, ValueError):
        return DASH


@register.filter
def duration(value: Any) -> str:
    """A timedelta as people read it: 850 ms, 2.0 s, 3 min 05 s, 1 h 02 min."""
    if value is None:
        return "–"
    seconds = value.total_seconds() if hasattr(value, "total_seconds") else float(value)
    if seconds < 1:
        return format_ms(seconds * 1000)
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


@register.filter
def usd(value: Any) -> str:
    if value is None:
        return DASH
    try:
        amount = float(value)
    except (TypeError, ValueError):
        return DASH
    return f"${amount:.4f}" if amount < 1 else f"${amount:,.2f}"


@register.filter
def get(mapping: Any, key: Any) -> Any:
    if isinstance(mapping, dict):
        return mapping.get(key, mapping.get(str(key)))
    return None


@register.filter
def anchor(evidence_id: Any) -> str:
    """The transcript anchor of an evidence id, "" when the transcript has no such item."""
    return anchor_for(evidence_id) or "" if isinstance(evidence_id, str) else ""


@register.filter
def heat(value: Any) -> str:
    """A CSS class for a score cell of the grid: h0 (0) ... h4 (1)."""
    if value is None:
        return "hna"
    try:
        return f"h{min(4, max(0, int(float(value) * 4 + 0.5)))}"
    except (TypeError, ValueError):
        return "hna"
