"""numeric_match (grading.md §3.4)."""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Any

from ..configs.models import LEGACY_DEFAULT_TOLERANCE
from ..refs import Resolved
from .common import (
    Env,
    PlainVerdict,
    PreparedGrader,
    VResult,
    cfg,
    fmt_num,
    pack_error,
    plain_verdict,
    prepared,
    quote,
)
from .text import strip_currency

# A number is ASCII only, for the plain parse and extract_number alike: `\d` and float() also
# take Arabic-Indic, fullwidth and other Unicode digits, float() also "nan", "inf" and "1_000".
_DECIMAL = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")


def parse_number(text: str, extract: bool) -> float | None:
    """The side as a decimal float (grading.md §3.4): trimmed, then the whole text must be one
    decimal number; with ``extract`` currency, commas and % go first and the leftmost number counts.
    A typeset minus sign (U+2212) is a minus: skipped, "−5" read as 5 and passed against 5."""
    t = text.strip()
    if "\u2212" in t:
        t = t.replace("\u2212", "-")
    if extract:
        m = _DECIMAL.search(strip_currency(t).replace(",", "").replace("%", ""))
        if m is None:
            return None
        t = m.group(0)
    elif t.strip("0123456789.") and _DECIMAL.fullmatch(t) is None:
        # (digits and dots alone need no pattern: float() reads exactly the ones it allows)
        return None
    try:
        v = float(t)
    except (ValueError, OverflowError):
        return None
    return v if math.isfinite(v) else None


def round_significant(x: float, digits: int) -> float:
    if x == 0 or digits <= 0:
        return x
    return float(f"{x:.{digits - 1}e}")


def tolerances(config: Any) -> tuple[float | None, float | None]:
    """(absolute, relative); both None means exact comparison."""
    absolute = cfg(config, "absolute_tolerance")
    relative = cfg(config, "relative_tolerance")
    if absolute is not None or relative is not None:
        return (None if absolute is None else float(absolute), None if relative is None else float(relative))
    tol = cfg(config, "tolerance")
    mode = cfg(config, "tolerance_mode")
    if tol is None and mode is None:
        return None, None
    tol = LEGACY_DEFAULT_TOLERANCE if tol is None else float(tol)
    return (tol, None) if str(mode or "relative") == "absolute" else (None, tol)


@prepared("numeric_match")
def numeric_match(config: Any) -> PreparedGrader:
    extract = bool(cfg(config, "extract_number", False))
    digits = cfg(config, "significant_digits")
    digits = int(digits) if digits else 0
    abs_tol, rel_tol = tolerances(config)

    def grade(actual: Resolved, expected: Resolved | None, env: Env) -> VResult | PlainVerdict:
        ev = expected.value if expected is not None else ""
        e = float(ev) if type(ev) in (int, float) and not extract and math.isfinite(float(ev)) else None
        if e is None:
            e_text = expected.text if expected is not None else ""
            e = parse_number(e_text, extract)
            if e is None:
                return pack_error(f"expected {quote(e_text, 80)} is not a number", "unparseable_expected")
        av = actual.value
        a = (
            float(av)
            if type(av) in (int, float) and not extract and math.isfinite(av)
            else parse_number(actual.text, extract)
        )
        if a is None:
            return plain_verdict(False, (_no_number_text, actual.text, e))
        if digits:
            a, e = round_significant(a, digits), round_significant(e, digits)
        diff = abs(a - e)
        if abs_tol is None and rel_tol is None:
            return plain_verdict(a == e, (_exact_text, a, e, diff))
        rel = 0.0 if diff == 0 else (math.inf if e == 0 else diff / abs(e))
        ok_abs = abs_tol is not None and diff <= abs_tol
        ok_rel = rel_tol is not None and rel <= rel_tol
        if not (ok_abs or ok_rel):
            ok_abs, ok_rel = _decimal_within(a, e, abs_tol, rel_tol)
        return plain_verdict(
            ok_abs or ok_rel, (_tolerance_text, a, e, diff, rel, abs_tol, rel_tol, ok_abs, ok_rel)
        )

    return grade


def _decimal_within(a: float, e: float, abs_tol: float | None, rel_tol: float | None) -> tuple[bool, bool]:
    """The tolerance checks in decimal, on the numbers as written (shortest round-trip form):
    in binary floats 1.1 - 1 is 0.10000000000000009, so 1.1 was outside an absolute tolerance
    of 0.1 of 1 and 1.1 outside a relative 0.1 of 1.0, though the difference equals it
    (§3.4: within a tolerance, which includes it). Only a failed float check comes here."""
    da, de = Decimal(repr(a)), Decimal(repr(e))
    diff = abs(da - de)
    ok_abs = abs_tol is not None and math.isfinite(abs_tol) and diff <= Decimal(repr(abs_tol))
    ok_rel = (
        rel_tol is not None
        and math.isfinite(rel_tol)
        and de != 0
        and diff <= Decimal(repr(rel_tol)) * abs(de)
    )
    return ok_abs, ok_rel


def _no_number_text(text: str, expected: float) -> str:
    return f"actual {quote(text, 80)} holds no number (expected {fmt_num(expected)})"


def _exact_text(a: float, e: float, diff: float) -> str:
    return f"{_head(a, e, diff)}; exact comparison"


def _head(a: float, e: float, diff: float) -> str:
    return f"actual {fmt_num(a)}, expected {fmt_num(e)}, abs diff {fmt_num(diff)}"


def _tolerance_text(
    a: float,
    e: float,
    diff: float,
    rel: float,
    abs_tol: float | None,
    rel_tol: float | None,
    ok_abs: bool,
    ok_rel: bool,
) -> str:
    parts = []
    if abs_tol is not None:
        parts.append(f"absolute tolerance {fmt_num(abs_tol)}: {'within' if ok_abs else 'outside'}")
    if rel_tol is not None:
        parts.append(
            f"relative diff {fmt_num(rel)} vs tolerance {fmt_num(rel_tol)}: {'within' if ok_rel else 'outside'}"
        )
    return f"{_head(a, e, diff)}; " + "; ".join(parts)
