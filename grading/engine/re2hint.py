"""A short hint for the Perl / PCRE constructs RE2 refuses (grading.md §3.1: every pattern is RE2).

RE2's own text names the token it stopped at ("invalid perl operator: (?=") but not why: a
pattern written for Python's ``re`` or PCRE most often fails on lookaround, a backreference,
a possessive quantifier or an atomic group, none of which RE2 has (its matching never
backtracks, so it cannot offer them). The hint is appended to that text, at publish
(``detail``) and at grading time (the pack error's evidence) alike.
"""

from __future__ import annotations

_OPERATORS = (
    (("(?=", "(?!"), "RE2 has no lookahead: (?=...) and (?!...) are not supported"),
    (("(?<=", "(?<!"), "RE2 has no lookbehind: (?<=...) and (?<!...) are not supported"),
    (("(?>",), "RE2 has no atomic groups: (?>...) is not supported"),
)
_BACKREFERENCES = "RE2 has no backreferences: \\1, \\k<name>, \\g1 and (?P=name) are not supported"
_POSSESSIVE = "RE2 has no possessive quantifiers: *+, ++, ?+ and {n}+ are not supported"


def re2_hint(pattern: str, error: str) -> str | None:
    """Why RE2 refused ``pattern`` with ``error`` (RE2's text), when it is a common
    construct from other engines; else None."""
    _, _, token = error.partition(": ")
    for starts, hint in _OPERATORS:
        if token.startswith(starts):
            return hint
    if error.startswith("invalid escape sequence: \\") and token[1:2] in tuple("123456789kg"):
        return _BACKREFERENCES
    if error.startswith("invalid perl operator: (?P") and "(?P=" in pattern:
        return _BACKREFERENCES
    if error.startswith("bad repetition operator: ") and len(token) > 1 and token.endswith("+"):
        return _POSSESSIVE
    return None


def with_hint(pattern: str, error: str) -> str:
    """RE2's ``error`` text, followed by the hint in parentheses when there is one."""
    hint = re2_hint(pattern, error)
    return f"{error} ({hint})" if hint else error
