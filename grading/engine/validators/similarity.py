"""Graded similarity validators (grading.md §3.3): fuzzy, token F1, BLEU, ROUGE, chrF."""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from typing import Any

from rapidfuzz.distance import Indel, LCSseq

from .. import jsontext
from ..refs import Resolved
from .common import Env, VResult, cfg, error, graded, head, pack_error

MAX_FUZZY_CODE_POINTS = 100_000
MAX_TOKENS = 200_000
_WS = re.compile(r"\s+")


def _prep(text: str, config: Any, fold_key: str = "case_insensitive") -> str:
    if cfg(config, "normalize", False):
        text = _WS.sub(" ", text.strip())
    if cfg(config, fold_key, False):
        text = text.casefold()
    return text


def _evidence(score: float, threshold: float, components: str, a: str, e: str) -> str:
    return (
        f"score {score:.4f} (threshold {threshold:g}); {components}; actual: {head(a)}; expected: {head(e)}"
    )


def references(expected: Resolved | None) -> tuple[list[str] | None, VResult | None]:
    """The array-of-references rule of §3.3."""
    if expected is None:
        return [""], None
    value = expected.value
    if isinstance(value, list):
        arr = value
    else:
        text = expected.text
        if not text.lstrip().startswith("["):
            return [text], None
        try:
            arr = jsontext.loads(text)
        except ValueError:
            return [text], None
        if not isinstance(arr, list):
            return [text], None
    if not all(isinstance(x, str) for x in arr):
        return None, pack_error(
            "expected is an array of references with non-string items", "invalid_expected"
        )
    if not arr:
        return None, pack_error("expected is an empty array of references", "invalid_expected")
    return arr, None


def fuzzy_match(actual: Resolved, expected: Resolved | None, config: Any, env: Env) -> VResult:
    a, e = actual.text, expected.text if expected is not None else ""
    if len(a) > MAX_FUZZY_CODE_POINTS or len(e) > MAX_FUZZY_CODE_POINTS:
        return error(
            f"input over limits: {len(a)} and {len(e)} code points (max {MAX_FUZZY_CODE_POINTS})",
            "input_too_large",
        )
    threshold = float(cfg(config, "threshold", 0.8))
    a2, e2 = _prep(a, config), _prep(e, config)
    if not a2 and not e2:
        score, dist = 1.0, 0
    else:
        dist = Indel.distance(a2, e2)
        score = 1.0 - dist / (len(a2) + len(e2))
    return graded(
        score,
        threshold,
        _evidence(score, threshold, f"indel distance {dist}, lengths {len(a2)}+{len(e2)}", a, e),
    )


# ---------------------------------------------------------------------------
# token_f1
# ---------------------------------------------------------------------------

_ARTICLE_TOKENS = frozenset({"a", "an", "the"})


def _strip_punct(text: str) -> str:
    return "".join(ch for ch in text if not unicodedata.category(ch).startswith("P"))


def f1_tokens(text: str, config: Any) -> list[str]:
    if cfg(config, "normalize", False):
        text = _WS.sub(" ", text.strip()).casefold()
    if cfg(config, "remove_punctuation", False):
        text = _strip_punct(text)
    tokens = text.split()
    if cfg(config, "remove_articles", False):
        tokens = [t for t in tokens if t not in _ARTICLE_TOKENS]
    return tokens


def token_f1(actual: Resolved, expected: Resolved | None, config: Any, env: Env) -> VResult:
    a, e = actual.text, expected.text if expected is not None else ""
    threshold = float(cfg(config, "threshold", 0.5))
    ta, te = f1_tokens(a, config), f1_tokens(e, config)
    if not ta and not te:
        score, comp = 1.0, "both empty"
    elif not ta or not te:
        score, comp = 0.0, f"tokens {len(ta)} actual, {len(te)} expected"
    else:
        ca, ce = Counter(ta), Counter(te)
        overlap = sum(min(n, ce[t]) for t, n in ca.items() if t in ce)
        p, r = overlap / len(ta), overlap / len(te)
        score = 0.0 if overlap == 0 else 2 * p * r / (p + r)
        comp = f"precision {p:.4f}, recall {r:.4f}, overlap {overlap}"
    return graded(score, threshold, _evidence(score, threshold, comp, a, e))


# ---------------------------------------------------------------------------
# BLEU
# ---------------------------------------------------------------------------


def _ngrams(tokens: list[str], n: int) -> Counter[tuple[str, ...]]:
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def bleu(
    candidate: list[str], refs: list[list[str]], max_ngram: int = 4, smoothing: str = "none"
) -> tuple[float, str]:
    c = len(candidate)
    if c == 0:
        return (
            (1.0, "empty candidate, empty reference")
            if len(refs) == 1 and not refs[0]
            else (0.0, "empty candidate")
        )
    top = min(max_ngram, c)
    logs = 0.0
    precisions = []
    for n in range(1, top + 1):
        cand = _ngrams(candidate, n)
        max_ref: Counter[tuple[str, ...]] = Counter()
        for r in refs:
            for g, k in _ngrams(r, n).items():
                if k > max_ref[g]:
                    max_ref[g] = k
        clipped = sum(min(k, max_ref[g]) for g, k in cand.items())
        total = c - n + 1
        if clipped == 0:
            if smoothing == "method1" and n > 1:
                p = 1.0 / (total + 1)
            else:
                return 0.0, f"zero {n}-gram precision"
        else:
            p = clipped / total
        precisions.append(p)
        logs += math.log(p)
    geo = math.exp(logs / top)
    ref_len = min((abs(len(x) - c), len(x)) for x in refs)[1]
    bp = 1.0 if c >= ref_len else math.exp(1 - ref_len / c)
    comps = ", ".join(f"p{n + 1} {p:.4f}" for n, p in enumerate(precisions))
    return bp * geo, f"{comps}, brevity penalty {bp:.4f} (c {c}, r {ref_len})"


def _tok(text: str, config: Any) -> list[str]:
    return _prep(text, config).split()


def bleu_score(actual: Resolved, expected: Resolved | None, config: Any, env: Env) -> VResult:
    refs, problem = references(expected)
    if problem is not None:
        return problem
    assert refs is not None
    threshold = float(cfg(config, "threshold", 0.3))
    cand = _tok(actual.text, config)
    ref_tokens = [_tok(r, config) for r in refs]
    if len(cand) > MAX_TOKENS:
        return error(f"input over limits: {len(cand)} tokens", "input_too_large")
    score, comp = bleu(
        cand, ref_tokens, int(cfg(config, "max_ngram", 4)), str(cfg(config, "smoothing", "none"))
    )
    return graded(score, threshold, _evidence(score, threshold, comp, actual.text, refs[0]))


# ---------------------------------------------------------------------------
# ROUGE
# ---------------------------------------------------------------------------


def _f(p: float, r: float, beta: float) -> float:
    if p == 0 and r == 0:
        return 0.0
    b2 = beta * beta
    return (1 + b2) * p * r / (b2 * p + r)


def rouge(cand: list[str], ref: list[str], variant: str = "rouge-l", beta: float = 1.0) -> tuple[float, str]:
    if not cand and not ref:
        return 1.0, "both empty"
    if not cand or not ref:
        return 0.0, "one side empty"
    if variant == "rouge-l":
        lcs = LCSseq.similarity(cand, ref)
        p, r = lcs / len(cand), lcs / len(ref)
        return _f(p, r, beta), f"LCS {lcs}, precision {p:.4f}, recall {r:.4f}"
    n = 2 if variant == "rouge-2" else 1
    cg, rg = _ngrams(cand, n), _ngrams(ref, n)
    tc, tr = sum(cg.values()), sum(rg.values())
    if tc == 0 or tr == 0:
        return 0.0, f"no {n}-grams on one side"
    overlap = sum(min(k, rg[g]) for g, k in cg.items() if g in rg)
    p, r = overlap / tc, overlap / tr
    return _f(p, r, beta), f"overlap {overlap}, precision {p:.4f}, recall {r:.4f}"


def rouge_score(actual: Resolved, expected: Resolved | None, config: Any, env: Env) -> VResult:
    refs, problem = references(expected)
    if problem is not None:
        return problem
    assert refs is not None
    variant = str(cfg(config, "variant", "rouge-l")).lower()
    if variant not in ("rouge-l", "rouge-1", "rouge-2"):
        return pack_error(f"unknown variant {variant!r}", "invalid_config")
    threshold = float(cfg(config, "threshold", 0.3))
    beta = float(cfg(config, "beta", 1.0))
    cand = _tok(actual.text, config)
    best, best_comp, best_ref = -1.0, "", refs[0]
    for ref in refs:
        env.check_time()
        s, comp = rouge(cand, _tok(ref, config), variant, beta)
        if s > best:
            best, best_comp, best_ref = s, comp, ref
    return graded(
        best, threshold, _evidence(best, threshold, f"{variant}: {best_comp}", actual.text, best_ref)
    )


# ---------------------------------------------------------------------------
# chrF
# ---------------------------------------------------------------------------


def chrf(a: str, e: str, char_order: int = 6, beta: float = 2.0) -> tuple[float, str]:
    a = "".join(a.split())
    e = "".join(e.split())
    if not a and not e:
        return 1.0, "both empty"
    if not a or not e:
        return 0.0, "one side empty"
    top = min(char_order, len(a), len(e))
    ps, rs = [], []
    for n in range(1, top + 1):
        ca = Counter(a[i : i + n] for i in range(len(a) - n + 1))
        ce = Counter(e[i : i + n] for i in range(len(e) - n + 1))
        overlap = sum(min(k, ce[g]) for g, k in ca.items() if g in ce)
        ps.append(overlap / (len(a) - n + 1))
        rs.append(overlap / (len(e) - n + 1))
    p, r = sum(ps) / top, sum(rs) / top
    return _f(p, r, beta), f"char precision {p:.4f}, recall {r:.4f}, orders 1..{top}"


def chrf_score(actual: Resolved, expected: Resolved | None, config: Any, env: Env) -> VResult:
    refs, problem = references(expected)
    if problem is not None:
        return problem
    assert refs is not None
    threshold = float(cfg(config, "threshold", 0.3))
    order, beta = int(cfg(config, "char_order", 6)), float(cfg(config, "beta", 2.0))
    a = _prep(actual.text, config)
    best, best_comp, best_ref = -1.0, "", refs[0]
    for ref in refs:
        env.check_time()
        s, comp = chrf(a, _prep(ref, config), order, beta)
        if s > best:
            best, best_comp, best_ref = s, comp, ref
    return graded(best, threshold, _evidence(best, threshold, best_comp, actual.text, best_ref))
