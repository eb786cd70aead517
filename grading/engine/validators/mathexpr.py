"""math_equivalence (grading.md §3.4): a normaliser, a small recursive-descent parser
(never ``eval``), numeric comparison and symbolic comparison at 5 seeded points."""

from __future__ import annotations

import hashlib
import math
import random
import re
from typing import Any

from ..refs import Resolved
from .common import Env, VResult, binary, cfg, failed, fmt_num, pack_error, quote

MAX_EXPR_CHARS = 5000
MAX_DEPTH = 60
DEFAULT_DELIMITER = "####"


class MathSyntaxError(ValueError):
    pass


# ---------------------------------------------------------------------------
# 1. normalise
# ---------------------------------------------------------------------------


def _matching_brace(s: str, open_at: int) -> int:
    depth = 0
    for i in range(open_at, len(s)):
        if s[i] == "{":
            depth += 1
        elif s[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    return -1


def _unbox(s: str) -> str:
    at = s.rfind("\\boxed{")
    if at < 0:
        return s
    close = _matching_brace(s, at + len("\\boxed"))
    return s[at + len("\\boxed{") : close] if close > 0 else s


def _frac(s: str) -> str:
    for name in ("\\dfrac", "\\tfrac", "\\frac"):
        while True:
            at = s.find(name + "{")
            if at < 0:
                break
            a_open = at + len(name)
            a_close = _matching_brace(s, a_open)
            if a_close < 0 or a_close + 1 >= len(s) or s[a_close + 1] != "{":
                raise MathSyntaxError("malformed \\frac")
            b_close = _matching_brace(s, a_close + 1)
            if b_close < 0:
                raise MathSyntaxError("malformed \\frac")
            s = (
                s[:at]
                + "(("
                + s[a_open + 1 : a_close]
                + ")/("
                + s[a_close + 2 : b_close]
                + "))"
                + s[b_close + 1 :]
            )
    return s


_ROOT_OPERAND = re.compile(r"√\s*(\d+(?:\.\d+)?|[A-Za-z]\w*)")
_REPLACEMENTS = (
    ("\\left", ""),
    ("\\right", ""),
    ("\\cdot", "*"),
    ("\\times", "*"),
    ("\\div", "/"),
    ("\\pi", "pi"),
    ("\\sqrt", "sqrt"),
    ("\\,", ""),
    ("\\;", ""),
    ("\\:", ""),
    ("\\!", ""),
    ("\\ ", ""),
    ("×", "*"),
    ("·", "*"),
    ("÷", "/"),
    ("−", "-"),
    ("–", "-"),
    ("π", "pi"),
    ("\u2009", ""),
    ("\u202f", ""),
    ("\u00a0", " "),
    (",", ""),
    ("{", "("),
    ("}", ")"),
    ("**", "^"),
)


def normalise(text: str, *, extract_answer: bool = False, delimiter: str = DEFAULT_DELIMITER) -> str:
    s = text
    if extract_answer and delimiter and delimiter in s:
        s = s[s.rfind(delimiter) + len(delimiter) :]
    s = s.strip()
    for d in ("$$", "$"):
        if len(s) >= 2 * len(d) and s.startswith(d) and s.endswith(d):
            s = s[len(d) : -len(d)].strip()
            break
    s = _unbox(s)
    s = _frac(s)
    s = _ROOT_OPERAND.sub(r"sqrt(\1)", s).replace("√", "sqrt")
    for old, new in _REPLACEMENTS:
        s = s.replace(old, new)
    return s.replace("\\", "").strip()


# ---------------------------------------------------------------------------
# 2. parse
# ---------------------------------------------------------------------------

_TOKEN = re.compile(r"\s*(?:(\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)|([A-Za-z]+)|(.))")


def tokenize(s: str) -> list[tuple[str, Any]]:
    if len(s) > MAX_EXPR_CHARS:
        raise MathSyntaxError("expression too long")
    out: list[tuple[str, Any]] = []
    pos = 0
    while pos < len(s):
        m = _TOKEN.match(s, pos)
        if m is None or m.end() == pos:
            break
        pos = m.end()
        num, ident, op = m.groups()
        if num is not None:
            out.append(("num", float(num)))
        elif ident is not None:
            if ident in ("sqrt", "pi", "e"):
                out.append(("id", ident))
            else:
                # Unknown words are products of one-letter variables ("2ab" = 2*a*b).
                out.extend(("id", ch) for ch in ident)
        elif op is not None:
            if op.isspace():
                continue
            if op not in "+-*/^()":
                raise MathSyntaxError(f"unexpected {op!r}")
            out.append(("op", op))
    return out


class _Parser:
    def __init__(self, tokens: list[tuple[str, Any]]) -> None:
        self.t = tokens
        self.i = 0
        self.depth = 0

    def peek(self) -> tuple[str, Any] | None:
        return self.t[self.i] if self.i < len(self.t) else None

    def take(self) -> tuple[str, Any]:
        tok = self.peek()
        if tok is None:
            raise MathSyntaxError("unexpected end of expression")
        self.i += 1
        return tok

    def parse(self) -> Any:
        if not self.t:
            raise MathSyntaxError("empty expression")
        node = self.expr()
        if self.peek() is not None:
            raise MathSyntaxError(f"unexpected {self.peek()[1]!r}")  # type: ignore[index]
        return node

    def expr(self) -> Any:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise MathSyntaxError("expression nested too deeply")
        node = self.term()
        while (tok := self.peek()) is not None and tok in (("op", "+"), ("op", "-")):
            self.i += 1
            node = ("add" if tok[1] == "+" else "sub", node, self.term())
        self.depth -= 1
        return node

    def term(self) -> Any:
        node = self.unary()
        while (tok := self.peek()) is not None:
            if tok in (("op", "*"), ("op", "/")):
                self.i += 1
                node = ("mul" if tok[1] == "*" else "div", node, self.unary())
            elif tok[0] in ("num", "id") or tok == ("op", "("):
                node = ("mul", node, self.power())  # implicit multiplication
            else:
                break
        return node

    def unary(self) -> Any:
        tok = self.peek()
        if tok in (("op", "-"), ("op", "+")):
            self.i += 1
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise MathSyntaxError("expression nested too deeply")
            inner = self.unary()
            self.depth -= 1
            return ("neg", inner) if tok[1] == "-" else inner  # type: ignore[index]
        return self.power()

    def power(self) -> Any:
        base = self.atom()
        if self.peek() == ("op", "^"):
            self.i += 1
            return ("pow", base, self.unary())
        return base

    def atom(self) -> Any:
        kind, val = self.take()
        if kind == "num":
            return ("num", val)
        if kind == "id":
            if val == "pi":
                return ("num", math.pi)
            if val == "e":
                return ("num", math.e)
            if val == "sqrt":
                return ("sqrt", self.power())
            return ("var", val)
        if val == "(":
            node = self.expr()
            if self.take() != ("op", ")"):
                raise MathSyntaxError("missing )")
            return node
        raise MathSyntaxError(f"unexpected {val!r}")


def parse_expression(text: str) -> Any:
    try:
        return _Parser(tokenize(text)).parse()
    except RecursionError:
        raise MathSyntaxError("expression nested too deeply") from None


def free_variables(node: Any, out: set[str] | None = None) -> set[str]:
    out = set() if out is None else out
    if node[0] == "var":
        out.add(node[1])
    elif node[0] != "num":
        for child in node[1:]:
            free_variables(child, out)
    return out


def evaluate(node: Any, env: dict[str, float]) -> float | None:
    """The value, or None where the expression is undefined (division by zero, ...)."""
    try:
        v = _eval(node, env)
    except (ArithmeticError, ValueError, RecursionError):
        return None
    return v if isinstance(v, float) and math.isfinite(v) else None


def _eval(node: Any, env: dict[str, float]) -> float:
    op = node[0]
    if op == "num":
        return float(node[1])
    if op == "var":
        return env[node[1]]
    if op == "neg":
        return -_eval(node[1], env)
    if op == "sqrt":
        x = _eval(node[1], env)
        if x < 0:
            raise ValueError("sqrt of a negative number")
        return math.sqrt(x)
    a, b = _eval(node[1], env), _eval(node[2], env)
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if op == "div":
        return a / b
    if abs(b) > 10_000 and abs(a) != 1:
        raise OverflowError("exponent too large")
    r = a**b
    if isinstance(r, complex):
        raise ValueError("complex result")
    return float(r)


# ---------------------------------------------------------------------------
# 3./4. compare
# ---------------------------------------------------------------------------


def _seed(context_seed: int, key: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{context_seed}:{key}".encode()).digest()[:8], "big")


def math_equivalence(actual: Resolved, expected: Resolved | None, config: Any, env: Env) -> VResult:
    mode = str(cfg(config, "comparison_mode", "symbolic")).lower()
    tol = float(cfg(config, "tolerance", 1e-6))
    extract = bool(cfg(config, "extract_answer", False))
    delim = str(cfg(config, "answer_delimiter", DEFAULT_DELIMITER))
    e_text = expected.text if expected is not None else ""
    try:
        e_norm = normalise(e_text, extract_answer=False)
        e_node = parse_expression(e_norm)
    except MathSyntaxError as exc:
        return pack_error(f"expected {quote(e_text, 80)} is not an expression: {exc}", "unparseable_expected")
    try:
        a_norm = normalise(actual.text, extract_answer=extract, delimiter=delim)
        a_node = parse_expression(a_norm)
    except MathSyntaxError as exc:
        return failed(f"actual {quote(actual.text, 80)} is not an expression: {exc}")
    shown = f"actual {quote(a_norm, 80)}, expected {quote(e_norm, 80)}"
    a_vars, e_vars = free_variables(a_node), free_variables(e_node)
    if mode == "numeric":
        if e_vars:
            return pack_error(
                f"expected has free variables {sorted(e_vars)} in numeric mode", "unparseable_expected"
            )
        if a_vars:
            return failed(f"{shown}: actual has free variables {sorted(a_vars)} in numeric mode")
        a, e = evaluate(a_node, {}), evaluate(e_node, {})
        if e is None:
            return pack_error(f"expected {quote(e_norm, 80)} has no finite value", "unparseable_expected")
        if a is None:
            return failed(f"{shown}: actual has no finite value")
        return binary(
            abs(a - e) <= tol,
            f"{shown}: {fmt_num(a)} vs {fmt_num(e)}, |diff| {fmt_num(abs(a - e))} (tolerance {tol:g})",
        )
    names = sorted(a_vars | e_vars)
    rng = random.Random(_seed(env.context.seed, env.key))
    points = [{n: rng.uniform(0.5, 2.5) for n in names} for _ in range(5 if names else 1)]
    e_values = [evaluate(e_node, point) for point in points]
    if all(e is None for e in e_values):
        # Nothing to agree with: two overflowing or undefined sides are not equal (10^400
        # passed for -10^400); an expected without a value is the pack's, as in numeric mode.
        at = f" at any of the {len(points)} seeded points" if names else ""
        return pack_error(f"expected {quote(e_norm, 80)} has no finite value{at}", "unparseable_expected")
    for point, e in zip(points, e_values, strict=True):
        a = evaluate(a_node, point)
        if a is None and e is None:
            continue
        where = (" at " + ", ".join(f"{k}={v:.4f}" for k, v in point.items())) if point else ""
        if a is None or e is None or abs(a - e) > tol * max(1.0, abs(e)):
            return binary(
                False,
                f"{shown}: differ{where}: {'undefined' if a is None else fmt_num(a)} vs "
                f"{'undefined' if e is None else fmt_num(e)}",
            )
    if names:
        return binary(
            True, f"{shown}: agree at {len(points)} seeded points of {', '.join(names)} in [0.5, 2.5]"
        )
    return binary(True, f"{shown}: equal within {tol:g}")
