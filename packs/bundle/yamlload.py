"""The pack YAML loader (spec/pack-format.md §2.1).

One pass over libyaml's parse events builds the plain Python value *and* a shadow tree of
positions and scalar texts. Why not ``yaml.load`` or ``yaml.compose`` with the C loader:

- the C loader ignores loader overrides, so duplicate keys, YAML 1.2 scalars and alias
  limits cannot be hooked into it (ARCHITECTURE.md, "Measured facts");
- the C composer recurses in C and crashes the process on deeply nested input, and is
  slower than building from events here (1.8 s vs 0.8 s for a 1.7 MB pack);
- aliases are expanded by this builder, so it counts the expansion as it goes and stops at
  the limit: an alias bomb never allocates more than the limit.

libyaml's scanner is quadratic in the *flow* nesting depth (30,000 ``[`` take 7 s), so a
cheap bracket-depth estimate runs before the parser sees the text.
"""

from __future__ import annotations

import math
import re
import sys
import unicodedata
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from itertools import accumulate
from typing import Any

import yaml
from yaml import (
    AliasEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
)

from .issues import BundleIssue, Path, format_path

MAX_YAML_BYTES = 5 * 1024 * 1024
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")  # UTF-32's little-endian mark starts like UTF-16's
MAX_EXPANDED_NODES = 1_000_000
MAX_ALIAS_FACTOR = 10
MAX_DEPTH = 200
# A flow-nesting estimate above this refuses the text before libyaml scans it.
MAX_FLOW_ESTIMATE = 1000

_STD = "tag:yaml.org,2002:"
_SCALAR_TAGS = {_STD + "str", _STD + "int", _STD + "float", _STD + "bool", _STD + "null"}
_MAP_TAG = _STD + "map"
_SEQ_TAG = _STD + "seq"

# YAML 1.2 core schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution).
_NULLS = frozenset({"", "~", "null", "Null", "NULL"})
_TRUE = frozenset({"true", "True", "TRUE"})
_FALSE = frozenset({"false", "False", "FALSE"})
_INT = re.compile(r"[-+]?[0-9]+\Z")
_OCT = re.compile(r"0o[0-7]+\Z")
_HEX = re.compile(r"0x[0-9a-fA-F]+\Z")
_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?\Z")
_INF = re.compile(r"[-+]?\.(?:inf|Inf|INF)\Z")
_NAN = re.compile(r"\.(?:nan|NaN|NAN)\Z")
_NUMERIC_START = frozenset("0123456789+-.")

_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_BRACKET_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def resolve_plain(text: str) -> Any:
    """A plain scalar's value under the YAML 1.2 core schema (``yes``, ``on``, dates stay text)."""
    if text in _NULLS:
        return None
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    if text[0] not in _NUMERIC_START:
        return text
    number: int | None = None
    try:
        if _INT.match(text):
            number = int(text)
        elif _OCT.match(text):
            number = int(text[2:], 8)
        elif _HEX.match(text):
            number = int(text[2:], 16)
    except ValueError:  # more digits than int() accepts (4300): far beyond a double
        return -math.inf if text[0] == "-" else math.inf
    if number is not None:
        return _finite_int(number)
    if _FLOAT.match(text):
        return float(text)
    if _INF.match(text):
        return -math.inf if text[0] == "-" else math.inf
    if _NAN.match(text):
        return math.nan
    return text


def _finite_int(number: int) -> int | float:
    """An integer as a JSON number can carry it: beyond the double range (~1.8e308) it is
    infinite, like the float literal ``1e400``, so it gets "must be a finite number" at its
    field. Kept as an int, it crashed the range checks (``math.isfinite`` overflows) and, past
    4300 digits, the canonical JSON of the case (``str(int)`` refuses it); kept as text, a
    number in a payload silently became a string."""
    if abs(number) > sys.float_info.max:
        return -math.inf if number < 0 else math.inf
    return number


class MapShadow(dict):
    """Positions of a mapping: key -> (key_line, key_col, line, col, child)."""

    __slots__ = ()


class SeqShadow(list):
    """Positions of a sequence: [(line, col, child)]."""

    __slots__ = ()


@dataclass(slots=True)
class Located:
    """Where a path points in the document (0-based positions, as libyaml marks)."""

    line: int
    column: int
    key_line: int | None = None
    key_column: int | None = None
    child: Any = None  # MapShadow | SeqShadow | scalar text
    exact: bool = True  # False when only an ancestor of the path exists


@dataclass
class YamlDocument:
    """A loaded pack document: its value, and positions for any path into it."""

    data: Any
    shadow: Any = None
    root_line: int = 0
    root_column: int = 0
    issues: list[BundleIssue] = field(default_factory=list)  # non-fatal (duplicate keys)
    # libyaml position (0-based) -> the editor's (1-based); set only when they differ.
    remap: Callable[[int, int], tuple[int, int]] | None = None

    def _shown(self, line: int, column: int) -> tuple[int, int]:
        if self.remap is not None:
            return self.remap(line, column)
        return line + 1, column + 1

    def locate(self, path: Path) -> Located:
        here = Located(self.root_line, self.root_column, child=self.shadow)
        for part in path:
            child = here.child
            entry = None
            if isinstance(child, MapShadow) and isinstance(part, str):
                entry = child.get(part)
                if entry is not None:
                    here = Located(entry[2], entry[3], entry[0], entry[1], entry[4])
            elif isinstance(child, SeqShadow) and isinstance(part, int) and 0 <= part < len(child):
                entry = child[part]
                here = Located(entry[0], entry[1], None, None, entry[2])
            if entry is None:
                here.exact = False
                return here
        return here

    def value_position(self, path: Path) -> tuple[int, int]:
        """1-based position of the value at ``path`` (or of its nearest existing ancestor)."""
        loc = self.locate(path)
        return self._shown(loc.line, loc.column)

    def parent_position(self, path: Path) -> tuple[int, int]:
        """1-based position of the mapping that lacks the key ``path`` names (§3).

        A null value is absent (§2.1): a key missing under ``implementation: null`` is
        placed at the nearest mapping that exists, as if ``implementation`` were not
        written at all."""
        parent = path[:-1]
        loc = self.locate(parent)
        while parent and loc.exact and isinstance(loc.child, str) and loc.child in _NULLS:
            parent = parent[:-1]
            loc = self.locate(parent)
        return self._shown(loc.line, loc.column)

    def key_position(self, path: Path) -> tuple[int, int]:
        """1-based position of the key naming ``path`` (the value's when it has no key)."""
        loc = self.locate(path)
        if loc.exact and loc.key_line is not None and loc.key_column is not None:
            return self._shown(loc.key_line, loc.key_column)
        return self._shown(loc.line, loc.column)

    def exists(self, path: Path) -> bool:
        return self.locate(path).exact

    def scalar_text(self, path: Path) -> str | None:
        """The source text of the scalar at ``path`` (``case_key: 007`` -> ``"007"``)."""
        loc = self.locate(path)
        if loc.exact and isinstance(loc.child, str):
            return loc.child
        return None


class LoadError(Exception):
    def __init__(self, issue: BundleIssue) -> None:
        super().__init__(issue.message)
        self.issue = issue


def _bundle_issue(message: str, line: int | None, column: int | None, detail: str = "") -> BundleIssue:
    return BundleIssue(field="bundle", message=message, line=line, column=column, detail=detail)


def _mark_issue(message: str, mark: Any, detail: str = "") -> BundleIssue:
    if mark is None:
        return _bundle_issue(message, None, None, detail)
    return _bundle_issue(message, mark.line + 1, mark.column + 1, detail)


# Line breaks as editors, browsers' text areas and ``str.splitlines``' common subset count
# them, and the three more that libyaml counts (YAML 1.1: NEL, LINE and PARAGRAPH SEPARATOR).
_EDITOR_BREAK = re.compile(r"\r\n|[\n\r]")
_LIBYAML_BREAK = re.compile(r"\r\n|[\n\r\x85\u2028\u2029]")
_LIBYAML_ONLY_BREAKS = ("\x85", "\u2028", "\u2029")


def _line_starts(text: str, breaks: re.Pattern[str]) -> list[int]:
    return [0, *(m.end() for m in breaks.finditer(text))]


def _offset_position(text: str, offset: int, starts: list[int] | None = None) -> tuple[int, int]:
    """1-based line and column of the character at ``offset``, lines as an editor shows them."""
    if starts is None:
        starts = _line_starts(text[:offset], _EDITOR_BREAK)
    line = bisect_right(starts, offset)
    return line, offset - starts[line - 1] + 1


def _position_remap(text: str) -> Callable[[int, int], tuple[int, int]] | None:
    """libyaml starts a new line at U+0085, U+2028 and U+2029 too, so after one of them its
    line numbers are ahead of the editor's (which breaks lines at CR and LF only). Returns
    the translation, or None for a text without such a character (nearly every pack)."""
    if not any(ch in text for ch in _LIBYAML_ONLY_BREAKS):
        return None
    yaml_starts = _line_starts(text, _LIBYAML_BREAK)
    editor_starts = _line_starts(text, _EDITOR_BREAK)

    def remap(line: int, column: int) -> tuple[int, int]:
        offset = yaml_starts[min(line, len(yaml_starts) - 1)] + column
        return _offset_position(text, min(offset, len(text)), editor_starts)

    return remap


def _remap_issues(
    issues: list[BundleIssue], remap: Callable[[int, int], tuple[int, int]] | None
) -> list[BundleIssue]:
    if remap is None:
        return issues
    shown = []
    for issue in issues:
        if issue.line is not None and issue.column is not None:
            line, column = remap(issue.line - 1, issue.column - 1)
            issue = replace(issue, line=line, column=column)
        shown.append(issue)
    return shown


def _indent_hint(text: str, line: int) -> str | None:
    """What libyaml does not say when a line is indented with a tab or a non-breaking space
    (pasted from a web page or a word processor): it reports "found character that cannot
    start any token" or "mapping values are not allowed here", often a line later. Looks at
    the error's line (0-based, libyaml's) and the one before it."""
    starts = _line_starts(text, _LIBYAML_BREAK)
    for index in (line, line - 1):
        if not 0 <= index < len(starts):
            continue
        start = starts[index]
        end = starts[index + 1] if index + 1 < len(starts) else len(text)
        content = text[start:end]
        indent = content[: len(content) - len(content.lstrip())]
        odd = next((ch for ch in indent if ch not in " \r\n"), None)
        if odd is None or not content.strip():
            continue
        shown = _offset_position(text, start)[0]
        what = "a tab" if odd == "\t" else f"U+{ord(odd):04X} ({unicodedata.name(odd, 'a space')})"
        return f"line {shown} is indented with {what}: YAML indents with spaces only"
    return None


def _flow_depth_estimate(text: str) -> int:
    """An upper estimate of the flow nesting depth: every bracket counted as if it were flow."""
    brackets = _NOT_BRACKET.sub("", text)
    if len(brackets) <= MAX_FLOW_ESTIMATE:
        return len(brackets)
    return max(accumulate(map(_BRACKET_STEP.__getitem__, brackets)), default=0)


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def load_yaml(raw: bytes) -> tuple[YamlDocument | None, list[BundleIssue]]:
    """Load one pack document. Returns ``(document, [])`` or ``(None, [fatal issue])``.

    Non-fatal issues (duplicate keys) are on ``document.issues``. Never raises on any input.
    """
    if len(raw) > MAX_YAML_BYTES:
        return None, [_bundle_issue("must be at most 5 MiB", None, None)]
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = raw[: exc.start].decode("utf-8", "replace")
        line, column = _offset_position(before, len(before))
        detail = f"invalid UTF-8: {exc.reason}"
        if raw.startswith(_UTF16_BOMS):
            detail += "; the file is UTF-16 (it starts with a UTF-16 byte-order mark): save it as UTF-8"
        return None, [_bundle_issue("must be valid YAML", line, column, detail)]
    if _flow_depth_estimate(text) > MAX_FLOW_ESTIMATE:
        return None, [_bundle_issue("is nested too deeply", None, None, f"more than {MAX_DEPTH} levels")]
    remap = _position_remap(text)
    try:
        document = _Builder(text).build()
    except LoadError as exc:
        fatal = [exc.issue]
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        detail = " ".join(part for part in (exc.context, exc.problem) if part)
        hint = _indent_hint(text, mark.line) if mark is not None else None
        fatal = [_mark_issue("must be valid YAML", mark, f"{detail}; {hint}" if hint else detail)]
    except yaml.reader.ReaderError as exc:
        line, column = _offset_position(text, min(exc.position, len(text)))
        return None, [_bundle_issue("must be valid YAML", line, column, str(exc).split("\n")[0])]
    except yaml.YAMLError as exc:  # any other libyaml complaint
        return None, [_bundle_issue("must be valid YAML", None, None, str(exc))]
    else:
        document.remap = remap
        document.issues = _remap_issues(document.issues, remap)
        return document, []
    return None, _remap_issues(fatal, remap)


class _Frame:
    __slots__ = (
        "value",
        "shadow",
        "is_map",
        "key",
        "key_mark",
        "key_merge",
        "line",
        "column",
        "start_count",
        "anchor",
        "explicit",
        "merges",
    )

    def __init__(self, is_map: bool, mark: Any, start_count: int, anchor: str | None) -> None:
        self.is_map = is_map
        self.value: Any = {} if is_map else []
        self.shadow: Any = MapShadow() if is_map else SeqShadow()
        self.key: str | None = None
        self.key_mark: tuple[int, int] = (0, 0)
        self.key_merge = False
        self.line = mark.line
        self.column = mark.column
        self.start_count = start_count
        self.anchor = anchor
        self.explicit: set[str] = set()
        self.merges: list[tuple[Any, Any, int, int]] | None = None


class _Builder:
    def __init__(self, text: str) -> None:
        self.text = text
        self.stack: list[_Frame] = []
        self.anchors: dict[str, tuple[Any, Any, int]] = {}  # name -> (value, shadow child, size)
        self.expanded = 0
        self.parsed = 0
        self.biggest_alias: tuple[int, Any] | None = None
        self.issues: list[BundleIssue] = []
        self.root: Any = None
        self.root_shadow: Any = None
        self.root_mark: tuple[int, int] = (0, 0)
        self.documents = 0

    def path(self) -> Path:
        parts: list[str | int] = []
        for frame in self.stack:
            if frame.is_map:
                if frame.key is not None:
                    parts.append(frame.key)
            else:
                parts.append(len(frame.value))
        return tuple(parts)

    def expecting_key(self) -> bool:
        stack = self.stack
        return bool(stack) and stack[-1].is_map and stack[-1].key is None

    def put_key(self, key: str, line: int, column: int, *, merge: bool) -> None:
        top = self.stack[-1]
        top.key, top.key_mark, top.key_merge = key, (line, column), merge

    def put(self, value: Any, line: int, column: int, child: Any) -> None:
        """Attach a finished value to the enclosing container (or make it the root)."""
        stack = self.stack
        if not stack:
            self.root, self.root_shadow, self.root_mark = value, child, (line, column)
            return
        top = stack[-1]
        if not top.is_map:
            top.value.append(value)
            top.shadow.append((line, column, child))
            return
        key = top.key
        key_line, key_column = top.key_mark
        if top.key_merge:
            if top.merges is None:
                top.merges = []
            top.merges.append((value, child, line, column))
        elif key in top.explicit:
            # The first value is used; the later key is the one reported (§2.1).
            self.issues.append(
                BundleIssue(
                    field=format_path(self.path()),
                    message="is defined more than once",
                    line=key_line + 1,
                    column=key_column + 1,
                )
            )
        else:
            top.explicit.add(key)  # type: ignore[arg-type]
            top.value[key] = value
            top.shadow[key] = (key_line, key_column, line, column, child)
        top.key = None
        top.key_merge = False

    def finish_map(self, frame: _Frame) -> None:
        """Apply ``<<`` merges: explicit keys win, then earlier merge sources win."""
        value, shadow = frame.value, frame.shadow
        for merge_value, merge_child, line, column in frame.merges or ():
            if isinstance(merge_value, dict):
                sources = [(merge_value, merge_child)]
            elif isinstance(merge_value, list) and all(isinstance(s, dict) for s in merge_value):
                sources = [(s, entry[2]) for s, entry in zip(merge_value, merge_child, strict=False)]
            else:
                self.issues.append(
                    BundleIssue(
                        field=format_path((*self.path(), "<<")),
                        message="must be an object or a list of objects",
                        line=line + 1,
                        column=column + 1,
                    )
                )
                continue
            for source, source_shadow in sources:
                for key, item in source.items():
                    if key in value:
                        continue
                    value[key] = item
                    if isinstance(source_shadow, MapShadow) and key in source_shadow:
                        shadow[key] = source_shadow[key]

    def build(self) -> YamlDocument:
        stack = self.stack
        for event in yaml.parse(self.text, Loader=yaml.CBaseLoader):
            cls = event.__class__
            if cls is ScalarEvent:
                self.scalar(event)
            elif cls is MappingStartEvent or cls is SequenceStartEvent:
                mark = event.start_mark
                is_map = cls is MappingStartEvent
                self.check_tag(event.tag, _MAP_TAG if is_map else _SEQ_TAG, mark)
                if self.expecting_key():
                    raise LoadError(_mark_issue("must use text mapping keys", mark))
                if len(stack) >= MAX_DEPTH:
                    raise LoadError(
                        _mark_issue("is nested too deeply", mark, f"more than {MAX_DEPTH} levels")
                    )
                self.parsed += 1
                self.expanded += 1
                stack.append(_Frame(is_map, mark, self.expanded, event.anchor))
            elif cls is MappingEndEvent or cls is SequenceEndEvent:
                frame = stack[-1]
                if frame.merges:
                    self.finish_map(frame)
                stack.pop()
                if frame.anchor is not None:
                    size = self.expanded - frame.start_count + 1
                    self.anchors[frame.anchor] = (frame.value, frame.shadow, size)
                self.put(frame.value, frame.line, frame.column, frame.shadow)
            elif cls is AliasEvent:
                self.alias(event)
            elif cls is DocumentStartEvent:
                self.documents += 1
                if self.documents > 1:
                    raise LoadError(_mark_issue("must contain exactly one YAML document", event.start_mark))
        if self.expanded > MAX_ALIAS_FACTOR * self.parsed and self.biggest_alias is not None:
            raise LoadError(_mark_issue("uses too many aliases", self.biggest_alias[1]))
        root, shadow = self.root, self.root_shadow
        if root is None:
            root, shadow = {}, MapShadow()
        if not isinstance(root, dict):
            line, column = self.root_mark
            raise LoadError(_bundle_issue("must be an object", line + 1, column + 1))
        return YamlDocument(
            data=root,
            shadow=shadow,
            root_line=self.root_mark[0],
            root_column=self.root_mark[1],
            issues=self.issues,
        )

    def check_tag(self, tag: str | None, allowed: str, mark: Any) -> None:
        if tag is None or tag == "!" or tag == allowed:
            return
        raise LoadError(_mark_issue("uses an unsupported tag", mark, tag))

    def scalar(self, event: Any) -> None:
        mark = event.start_mark
        text = event.value
        tag = event.tag
        plain = event.implicit[0]
        if plain:
            value = resolve_plain(text)
        elif tag is None or tag == "!" or tag == _STD + "str":
            value = text
        elif tag in _SCALAR_TAGS:
            value = resolve_plain(text) if text else None
        else:
            raise LoadError(_mark_issue("uses an unsupported tag", mark, tag))
        self.parsed += 1
        self.expanded += 1
        if "\x00" in text:
            # PostgreSQL cannot store U+0000 in text or jsonb: refuse it here, not at publish.
            where = (*self.path(), text) if self.expecting_key() else self.path()
            self.issues.append(
                BundleIssue(
                    field=format_path(where) or "bundle",
                    message="must not contain NUL characters",
                    line=mark.line + 1,
                    column=mark.column + 1,
                )
            )
        if self.expecting_key():
            # Keys are always their text; a plain "<<" is the merge key (a quoted one is not).
            self.put_key(text, mark.line, mark.column, merge=bool(plain) and text == "<<")
        else:
            self.put(value, mark.line, mark.column, text)
        if event.anchor is not None:
            self.anchors[event.anchor] = (value, text, 1)

    def alias(self, event: Any) -> None:
        mark = event.start_mark
        anchored = self.anchors.get(event.anchor)
        if anchored is None:
            raise LoadError(
                _mark_issue("must be valid YAML", mark, f"found undefined alias {event.anchor!r}")
            )
        value, child, size = anchored
        self.parsed += 1
        self.expanded += size
        if self.biggest_alias is None or size > self.biggest_alias[0]:
            self.biggest_alias = (size, mark)
        if self.expanded > MAX_EXPANDED_NODES:
            raise LoadError(_mark_issue("uses too many aliases", mark))
        if self.expecting_key():
            if not isinstance(child, str):
                raise LoadError(_mark_issue("must use text mapping keys", mark))
            self.put_key(child, mark.line, mark.column, merge=False)
            return
        self.put(_copy(value), mark.line, mark.column, child)
