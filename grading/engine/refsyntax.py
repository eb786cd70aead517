"""Evidence-reference syntax (pack-format §8, grading.md §1.3) and the JSON path subset.

Syntax only: ``parse_reference`` trims and classifies a reference string; whether it
resolves for a case is ``refs.py``'s job. ``parse_json_path`` parses the JSON path subset
of json_path_match and postcondition (``$``, ``.name``, ``['name']``, ``[N]``).

Every pattern here is our own fixed pattern, so Python ``re`` is fine.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import StrEnum


class RefKind(StrEnum):
    FINAL_OUTPUT = "final_output"  # final_output, run.final_output
    CHALLENGE_INPUT = "challenge_input"
    CASE_PAYLOAD = "case_payload"  # case.payload[.<p>]
    CASE_INPUT = "case_input"  # case.inputs.<key>[.<p>]
    CASE_EXPECTATION = "case_expectation"  # case.expectations.<key>[.<p>]
    ARTIFACT = "artifact"  # artifact.<key>[.<field>]
    FILE = "file"  # file:<check>
    LITERAL = "literal"  # literal:<text>
    TRANSCRIPT = "transcript"  # transcript.full|from_mismatch|last_n:<N>, turn.expectations
    TOOL_CALLS = "tool_calls"


# Kinds whose value comes from the case definition (payload, inputs, expectations, assets):
# a reference of these kinds can fail to resolve for a given case (reference_missing).
CASE_DATA_KINDS = frozenset(
    {
        RefKind.CHALLENGE_INPUT,
        RefKind.CASE_PAYLOAD,
        RefKind.CASE_INPUT,
        RefKind.CASE_EXPECTATION,
        RefKind.ARTIFACT,
    }
)


class RefSyntaxError(ValueError):
    """The text is not a supported evidence reference."""


@dataclass(frozen=True, slots=True)
class EvidenceRef:
    """A parsed evidence reference.

    ``text`` is the trimmed reference. ``name`` is the input, expectation, asset or check
    key, or the transcript slice (``full``, ``from_mismatch``, ``last_n``, ``turn.expectations``).
    ``path`` holds the remaining dotted segments, verbatim (payload path, or an artifact
    field such as ``content``). ``literal`` is the text after ``literal:``; ``last_n`` is N.
    """

    text: str
    kind: RefKind
    name: str | None = None
    path: tuple[str, ...] = ()
    literal: str | None = None
    last_n: int | None = None

    @property
    def is_case_data(self) -> bool:
        return self.kind in CASE_DATA_KINDS


_FIXED: dict[str, tuple[RefKind, str | None]] = {
    "final_output": (RefKind.FINAL_OUTPUT, None),
    "run.final_output": (RefKind.FINAL_OUTPUT, None),
    "challenge_input": (RefKind.CHALLENGE_INPUT, None),
    "tool_calls": (RefKind.TOOL_CALLS, None),
    "transcript.full": (RefKind.TRANSCRIPT, "full"),
    "transcript.from_mismatch": (RefKind.TRANSCRIPT, "from_mismatch"),
    "turn.expectations": (RefKind.TRANSCRIPT, "turn.expectations"),
}

_LAST_N = re.compile(r"transcript\.last_n:([0-9]+)\Z")


def _segments(rest: str) -> tuple[str, ...]:
    parts = tuple(rest.split("."))
    if any(not part.strip() for part in parts):
        raise RefSyntaxError(f"empty path segment in {rest!r}")
    return parts


def parse_reference(text: str) -> EvidenceRef:
    """Trim and classify an evidence reference; raise ``RefSyntaxError`` when unsupported."""
    if not isinstance(text, str):
        raise RefSyntaxError("not a string")
    ref = text.strip()
    if ref in _FIXED:
        kind, name = _FIXED[ref]
        return EvidenceRef(ref, kind, name=name)
    if ref.startswith("literal:"):
        return EvidenceRef(ref, RefKind.LITERAL, literal=ref[len("literal:") :])
    if ref.startswith("file:"):
        key = ref[len("file:") :].strip()
        if not key:
            raise RefSyntaxError("file: needs a post_execution_check key")
        return EvidenceRef(ref, RefKind.FILE, name=key)
    if ref == "case.payload":
        return EvidenceRef(ref, RefKind.CASE_PAYLOAD)
    if ref.startswith("case.payload."):
        return EvidenceRef(ref, RefKind.CASE_PAYLOAD, path=_segments(ref[len("case.payload.") :]))
    for prefix, kind in (
        ("case.inputs.", RefKind.CASE_INPUT),
        ("case.expectations.", RefKind.CASE_EXPECTATION),
    ):
        if ref.startswith(prefix):
            name, *path = _segments(ref[len(prefix) :])
            return EvidenceRef(ref, kind, name=name, path=tuple(path))
    if ref.startswith("artifact."):
        name, *path = _segments(ref[len("artifact.") :])
        return EvidenceRef(ref, RefKind.ARTIFACT, name=name, path=tuple(path))
    match = _LAST_N.match(ref)
    if match and int(match.group(1)) > 0:
        return EvidenceRef(ref, RefKind.TRANSCRIPT, name="last_n", last_n=int(match.group(1)))
    raise RefSyntaxError(f"unsupported evidence reference {ref!r}")


def try_parse_reference(text: object) -> EvidenceRef | None:
    try:
        return parse_reference(text)  # type: ignore[arg-type]
    except RefSyntaxError:
        return None


def is_supported_reference(text: object) -> bool:
    return try_parse_reference(text) is not None


# ECMA-262 pattern (JSON Schema) accepting exactly what ``parse_reference`` accepts, surrounding
# whitespace included (the validator trims first). A segment is "non-blank": optional
# whitespace, then a character that is neither a dot nor whitespace, then anything but a dot.
_SEG = r"\.\s*[^.\s][^.]*"
REFERENCE_JSON_PATTERN = (
    r"^\s*(?:final_output|run\.final_output|challenge_input|tool_calls|transcript\.full"
    r"|transcript\.from_mismatch|turn\.expectations|transcript\.last_n:0*[1-9][0-9]*"
    rf"|case\.payload(?:{_SEG})*|case\.(?:inputs|expectations)(?:{_SEG})+|artifact(?:{_SEG})+"
    r"|file:\s*\S[\s\S]*|literal:[\s\S]*)\s*$"
)


# ---------------------------------------------------------------------------
# JSON path subset (grading.md §3.2): $, .name, ['name'] / ["name"], [N] with N >= 0
# ---------------------------------------------------------------------------


class JsonPathSyntaxError(ValueError):
    """The path uses syntax outside the supported subset."""


# Characters that may not appear in a bare ``.name`` segment: they belong to wildcards,
# filters, slices, unions or quoting, none of which the subset supports.
_NAME = re.compile(r"[^.\[\]*?()@'\",:\s$]+")
_INDEX = re.compile(r"[0-9]+\Z")


def _bracket(path: str, start: int) -> tuple[str | int, int]:
    quote = path[start + 1 : start + 2]
    if quote in ("'", '"'):
        end = start + 2
        while end < len(path):
            if path[end] == "\\":
                end += 2
                continue
            if path[end] == quote:
                break
            end += 1
        if end >= len(path) or path[end + 1 : end + 2] != "]":
            raise JsonPathSyntaxError(f"unterminated quoted name at position {start}")
        body = path[start + 2 : end]
        if quote == "'":
            body = body.replace("\\'", "'").replace('"', '\\"')
        try:
            name = json.loads('"' + body + '"')
        except ValueError as exc:
            raise JsonPathSyntaxError(f"invalid quoted name at position {start}") from exc
        return name, end + 2
    end = path.find("]", start)
    if end < 0:
        raise JsonPathSyntaxError(f"unterminated bracket at position {start}")
    content = path[start + 1 : end].strip()
    if not content:
        raise JsonPathSyntaxError(f"empty brackets at position {start}")
    if content == "*":
        raise JsonPathSyntaxError("wildcards are not supported")
    if content.startswith("?") or content.startswith("("):
        raise JsonPathSyntaxError("filters and expressions are not supported")
    if ":" in content:
        raise JsonPathSyntaxError("slices are not supported")
    if "," in content:
        raise JsonPathSyntaxError("unions are not supported")
    if content.startswith("-"):
        raise JsonPathSyntaxError("negative indexes are not supported")
    if _INDEX.match(content):
        return int(content), end + 1
    if _NAME.fullmatch(content):
        return content, end + 1  # a bare [name], as upstream accepts
    raise JsonPathSyntaxError(f"unsupported bracket expression [{content}]")


def parse_json_path(path: str) -> tuple[str | int, ...]:
    """Parse ``$.a['b'][0]`` into ``("a", "b", 0)``; raise ``JsonPathSyntaxError`` otherwise."""
    if not isinstance(path, str):
        raise JsonPathSyntaxError("not a string")
    path = path.strip()
    if not path.startswith("$"):
        raise JsonPathSyntaxError("a JSON path starts with $")
    steps: list[str | int] = []
    i = 1
    while i < len(path):
        char = path[i]
        if char == ".":
            if path[i + 1 : i + 2] == ".":
                raise JsonPathSyntaxError("recursive descent (..) is not supported")
            if path[i + 1 : i + 2] == "*":
                raise JsonPathSyntaxError("wildcards are not supported")
            match = _NAME.match(path, i + 1)
            if not match:
                raise JsonPathSyntaxError(f"missing name at position {i + 1}")
            steps.append(match.group(0))
            i = match.end()
        elif char == "[":
            step, i = _bracket(path, i)
            steps.append(step)
        else:
            raise JsonPathSyntaxError(f"unexpected {char!r} at position {i}")
    return tuple(steps)
