"""Structured edits of a draft's YAML that keep its comments and formatting.

ruamel.yaml's round-trip mode keeps comments, key order, flow/block style and quoting of
everything an edit does not touch. Callers validate the text with ``packs.bundle`` first:
these helpers are only used on text that parsed (so alias bombs never reach ruamel).
"""

from __future__ import annotations

import io
import json
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError
from ruamel.yaml.util import load_yaml_guess_indent

from grading.engine import jsontext
from packs.bundle.issues import Path
from packs.bundle.yamlload import _LIBYAML_BREAK, YamlDocument, _line_starts, load_yaml


class YamlEditError(Exception):
    """The draft's YAML cannot be edited structurally (it does not parse, or has no such place)."""


@dataclass
class CaseEdit:
    """One case as the structured form edits it."""

    input_set_key: str
    challenge_key: str
    case_key: str
    payload: dict[str, Any] = field(default_factory=dict)
    inputs: list[dict[str, Any]] = field(default_factory=list)
    expectations: list[dict[str, Any]] = field(default_factory=list)
    # The key the case had before the edit; empty when adding a case.
    original_case_key: str = ""


def _yaml_for(text: str) -> tuple[YAML, Any, YamlDocument]:
    # The guarded loader first (size, aliases, nesting): ruamel recurses once per level in
    # Python, so a draft nested a few hundred deep raised RecursionError (a 500), and it would
    # build whatever aliases the text names. Its document also gives the keys as validation
    # reads them (``_scalar``).
    document = _document(text)
    try:
        _, indent, block_seq_indent = load_yaml_guess_indent(text)
    except YAMLError as exc:
        raise YamlEditError(f"the YAML does not parse: {exc}") from exc
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096  # never re-wrap long lines
    offset = block_seq_indent or 0
    sequence = indent or 2
    mapping = sequence - offset if sequence - offset >= 2 else 2
    yaml.indent(mapping=mapping, sequence=max(sequence, offset + 2), offset=offset)
    try:
        data = yaml.load(text)
    except YAMLError as exc:
        raise YamlEditError(f"the YAML does not parse: {exc}") from exc
    if not isinstance(data, CommentedMap):
        raise YamlEditError("the bundle must be a mapping")
    return yaml, data, document


def _dump(yaml: YAML, data: Any) -> str:
    out = io.StringIO()
    yaml.dump(data, out)
    return out.getvalue()


def _set_field(text: str, section: str, field: str, value: Any) -> str:
    """``<section>.<field>`` set to ``value``; everything else (comments, layout) as it was."""
    yaml, data, _document_ = _yaml_for(text)
    mapping = data.get(section)
    if not isinstance(mapping, dict):
        raise YamlEditError(f"the bundle has no {section} mapping")
    in_place = _replace_scalar(text, data, section, field, value)
    if in_place is not None:
        return in_place
    mapping[field] = value
    return _dump(yaml, data)


# A value the field setters write (a version number, a slug): plain in any context.
_PLAIN_VALUE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# The scalar a value position holds: quoted, or plain up to what ends one in a flow mapping.
_SCALAR_TOKEN = re.compile(r"""'[^'\n]*'|"[^"\\\n]*"|[^\s,\]}#'"][^\s,\]}#]*""")


def _replace_scalar(text: str, data: CommentedMap, section: str, field: str, value: Any) -> str | None:
    """The text with only the scalar at ``<section>.<field>`` rewritten, where it stands, or
    None when that cannot be done safely. ruamel's dump of the whole document re-indents
    block sequences and joins the continuation lines of flow mappings: a new version of the
    mental-math example differed from the one it came from on 46 lines, all noise in its diff.
    The result must read as the text with just that one value changed, or it is not used."""
    mapping = data[section]
    if field not in mapping or not _PLAIN_VALUE.fullmatch(str(value)):
        return None
    line, column = mapping.lc.value(field)
    starts = _line_starts(text, _LIBYAML_BREAK)
    if line >= len(starts):
        return None
    token = _SCALAR_TOKEN.match(text, starts[line] + column)
    if token is None:
        return None
    quote = token.group()[0] if token.group()[0] in "'\"" else ""
    edited = f"{text[: token.start()]}{quote}{value}{quote}{text[token.end() :]}"
    try:
        expected, got = _load_plain(text), _load_plain(edited)
    except YamlEditError:
        return None
    expected[section][field] = value
    return edited if got == expected else None


def set_version_number(text: str, number: int) -> str:
    """``version.number`` set to ``number``; everything else as it was."""
    return _set_field(text, "version", "number", number)


def pack_slug(text: str) -> str:
    """``pack.slug`` as the text has it ("" when absent or not text)."""
    pack = _load_plain(text).get("pack")
    slug = pack.get("slug") if isinstance(pack, dict) else None
    return slug.strip() if isinstance(slug, str) else ""


def set_pack_slug(text: str, slug: str) -> str:
    """``pack.slug`` set to ``slug``; everything else as it was."""
    return _set_field(text, "pack", "slug", slug)


def _scalar(document: YamlDocument, path: Path, value: Any) -> str:
    """A key as validation reads it (pack-format §2.1): a string trimmed, and a YAML number
    or boolean as written, ``case_key: 007`` being "007" (its value, 7, is not the key)."""
    if isinstance(value, str):
        return value.strip()
    if value is None or isinstance(value, (dict, list)):
        return ""
    written = document.scalar_text(path)
    return (written if written is not None else str(value)).strip()


def _case_key(document: YamlDocument, path: Path, case: Any) -> str:
    """A case's effective key: ``case_key``, else ``item_key`` (pack-format §5.2)."""
    if not isinstance(case, dict):
        return ""
    return _scalar(document, (*path, "case_key"), case.get("case_key")) or _scalar(
        document, (*path, "item_key"), case.get("item_key")
    )


def _case_list(input_set: Any) -> str:
    """Where a set's cases are, as validation reads them (``checks._normalize_set``): its
    ``cases``, or its legacy ``items`` when it has items and no cases."""
    if isinstance(input_set, dict) and input_set.get("items") and not input_set.get("cases"):
        return "items"
    return "cases"


def _set_index(document: YamlDocument, key: str) -> int | None:
    for index, item in enumerate(_list(document.data.get("input_sets"))):
        if isinstance(item, dict) and _scalar(document, ("input_sets", index, "key"), item.get("key")) == key:
            return index
    return None


def _case_index(document: YamlDocument, set_index: int, case_key: str) -> int | None:
    input_set = document.data["input_sets"][set_index]
    list_name = _case_list(input_set)
    for index, case in enumerate(_list(input_set.get(list_name))):
        if _case_key(document, ("input_sets", set_index, list_name, index), case) == case_key:
            return index
    return None


def _find_set(
    data: CommentedMap, document: YamlDocument, key: str, *, create: bool
) -> tuple[CommentedMap, int | None]:
    """The input set keyed ``key`` in ruamel's tree (found by its position in the guarded
    document, whose keys read as validation reads them), and that position."""
    index = _set_index(document, key)
    sets = data.get("input_sets")
    if index is not None and isinstance(sets, list) and isinstance(sets[index], dict):
        return sets[index], index
    if not create:
        raise YamlEditError(f"no input set {key!r}")
    if sets is None:
        sets = CommentedSeq()
        data["input_sets"] = sets
    if not isinstance(sets, list):
        raise YamlEditError("input_sets must be a list")
    new = CommentedMap([("key", key), ("name", key), ("cases", CommentedSeq())])
    sets.append(new)
    return new, None


# The fields of an input and an expectation the case form has cells for; any other field of
# a row (an input's ``path``, an ``artifact_key``) is kept when the form saves the row.
INPUT_FIELDS = ("key", "kind", "value")
EXPECTATION_FIELDS = ("key", "kind", "value", "source")


def _row_key(row: Any) -> str:
    return str(row.get("key") or "").strip() if isinstance(row, dict) else ""


def _rows(rows: list[dict[str, Any]], fields: tuple[str, ...], old: Any) -> CommentedSeq:
    """The form's rows, each merged into the row it edits (the one with its key, else the one
    at its place whose key the form no longer has): fields without a cell stay."""
    old = old if isinstance(old, list) else []
    new_keys = {str(row.get("key") or "").strip() for row in rows}
    used: set[int] = set()
    seq = CommentedSeq()
    for index, row in enumerate(rows):
        key = str(row.get("key") or "").strip()
        match = next((i for i, o in enumerate(old) if i not in used and _row_key(o) == key), None)
        if match is None and index < len(old) and index not in used and _row_key(old[index]) not in new_keys:
            match = index
        item = CommentedMap()
        if match is not None and isinstance(old[match], dict):
            used.add(match)
            item = CommentedMap((k, v) for k, v in old[match].items() if k not in fields)
        for name in fields:
            value = row.get(name)
            if value is None or value == "":
                continue
            item[name] = value
        seq.append(item)
    return seq


def upsert_case(text: str, edit: CaseEdit) -> str:
    """Add a case to an input set, or replace the one keyed ``edit.original_case_key``.

    Keys the form does not manage (assets, user_simulator, artifacts, timeouts) survive a
    replacement, as do comments around and inside the case.
    """
    yaml, data, document = _yaml_for(text)
    input_set, set_index = _find_set(data, document, edit.input_set_key, create=not edit.original_case_key)
    list_name = _case_list(input_set)
    legacy = list_name == "items"
    if legacy and (edit.inputs or edit.expectations):
        raise YamlEditError(
            "this input set is written as legacy items, which take no inputs or expectations; "
            "rename items to cases first"
        )
    entries = input_set.get(list_name)
    if entries is None:
        entries = CommentedSeq()
        input_set[list_name] = entries
    if not isinstance(entries, list):
        raise YamlEditError(f"input_sets.{edit.input_set_key}.{list_name} must be a list")
    key_field = "item_key" if legacy else "case_key"
    spans = _case_spans(text, input_set, list_name)
    target: Any = None
    if edit.original_case_key:
        index = None if set_index is None else _case_index(document, set_index, edit.original_case_key)
        if index is None:
            raise YamlEditError(f"no case {edit.original_case_key!r} in input set {edit.input_set_key!r}")
        target = entries[index]
        # What the edit keeps is left as written (``case_key: 007`` stays so, unquoted).
        path = ("input_sets", set_index, list_name, index)
        if _scalar(document, (*path, "challenge_key"), target.get("challenge_key")) != edit.challenge_key:
            target["challenge_key"] = edit.challenge_key
        if edit.original_case_key != edit.case_key or key_field not in target:
            target[key_field] = edit.case_key
        if (
            not legacy
            and "item_key" in target
            and _scalar(document, (*path, "item_key"), target["item_key"]) != edit.case_key
        ):
            del target["item_key"]
    else:
        if set_index is not None and _case_index(document, set_index, edit.case_key) is not None:
            raise YamlEditError(f"input set {edit.input_set_key!r} already has a case {edit.case_key!r}")
        target = CommentedMap([("challenge_key", edit.challenge_key), (key_field, edit.case_key)])
        entries.append(target)
    _set_or_drop(target, "payload", CommentedMap(edit.payload.items()) if edit.payload else None)
    if not legacy:
        _set_or_drop(target, "inputs", _rows(edit.inputs, INPUT_FIELDS, target.get("inputs")))
        _set_or_drop(
            target,
            "expectations",
            _rows(edit.expectations, EXPECTATION_FIELDS, target.get("expectations")),
        )
    if spans is not None:
        index = next(i for i, c in enumerate(entries) if c is target)
        # A new case goes after the last case's own lines.
        span = spans[index] if index < len(spans) else (spans[-1][1], spans[-1][1], spans[-1][2])
        spliced = _splice(text, data, span, _case_text(target, span))
        if spliced is not None:
            return spliced
    return _dump(yaml, data)


def delete_case(text: str, *, input_set_key: str, case_key: str) -> str:
    yaml, data, document = _yaml_for(text)
    input_set, set_index = _find_set(data, document, input_set_key, create=False)
    list_name = _case_list(input_set)
    index = None if set_index is None else _case_index(document, set_index, case_key)
    entries = input_set.get(list_name)
    if index is None or not isinstance(entries, list):
        raise YamlEditError(f"no case {case_key!r} in input set {input_set_key!r}")
    spans = _case_spans(text, input_set, list_name)
    del entries[index]
    if spans is not None:
        # only the case's own lines go; the rest of the text stays as written
        start, end, _ = spans[index]
        spliced = _splice(text, data, (start, end, end), "")
        if spliced is not None:
            return spliced
    return _dump(yaml, data)


# A block sequence entry's first line up to its content: the indentation, the dash, spaces.
_ENTRY_PREFIX = re.compile(r"( *)- +")


def _case_spans(text: str, input_set: CommentedMap, list_name: str) -> list[tuple[int, int, int]] | None:
    """``(first line, end line, dash column)`` of each case of a block-style list, as 0-based
    lines of ``text`` (end exclusive, after the case's last line of its own: comments and
    blank lines after it at its dash's column or left of it belong to what follows). None
    when the list is not laid out so (flow style, empty, an entry's content not on its dash's
    line, line breaks other than LF): the edit then dumps the whole document."""
    entries = input_set.get(list_name)
    if not isinstance(entries, CommentedSeq) or not entries or entries.fa.flow_style():
        return None
    if any(c in text for c in "\r\x85\u2028\u2029"):
        return None
    lines = text.split("\n")
    spans = []
    for index in range(len(entries)):
        line, column = entries.lc.item(index)
        prefix = _ENTRY_PREFIX.fullmatch(lines[line][:column]) if line < len(lines) else None
        if prefix is None:
            return None
        dash = len(prefix.group(1))
        end = line + 1
        for number in range(line + 1, len(lines)):
            content = lines[number].lstrip(" ")
            if not content:
                continue
            indent = len(lines[number]) - len(content)
            if indent <= dash and not content.startswith("#"):
                break
            if indent > dash:
                end = number + 1
        spans.append((line, end, dash))
    return spans


def _case_text(case: CommentedMap, span: tuple[int, int, int]) -> str | None:
    """``case`` as a block sequence entry at the dash column of ``span``, nested mappings
    indented by two and sequences' dashes by two under their key, as the examples are written.
    It is dumped where the examples have a case (``input_sets: - cases: - ``, its dash at
    column 6), so the comments at the end of its lines keep their columns there."""
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096
    yaml.indent(mapping=2, sequence=4, offset=2)
    wrapper = CommentedMap([("input_sets", CommentedSeq([CommentedMap([("cases", CommentedSeq([case]))])]))])
    lines = _dump(yaml, wrapper).splitlines(keepends=True)
    if lines[:2] != ["input_sets:\n", "  - cases:\n"]:
        return None
    out = []
    for line in lines[2:]:
        if line.strip() and not line.startswith(" " * 6):
            return None
        out.append(" " * span[2] + line[6:] if line.strip() else line.lstrip(" "))
    return "".join(out)


def _comment_lines(text: str) -> Counter[str]:
    return Counter(line for line in text.split("\n") if line.lstrip().startswith("#"))


def _splice(text: str, data: CommentedMap, span: tuple[int, int, int], new: str | None) -> str | None:
    """``text`` with lines ``span[0]:span[1]`` replaced by ``new``, when that reads as ``data``
    (what the structured edit made of the whole document) and repeats no comment; else None."""
    if new is None:
        return None
    lines = text.split("\n")
    start, end, _ = span
    before = "".join(line + "\n" for line in lines[:start])
    after = "\n".join(lines[end:])
    spliced = before + new + after
    try:
        if _plain(_load_plain(spliced)) != _plain(data):
            return None
    except YamlEditError:
        return None
    if _comment_lines(spliced) - _comment_lines(text):
        return None
    return spliced


def _set_or_drop(target: CommentedMap, key: str, value: Any) -> None:
    if value:
        if key in target and _plain(target[key]) == _plain(value):
            return  # unchanged: keep its original style and comments
        old = target.get(key)
        if isinstance(old, CommentedMap | CommentedSeq) and old.fa.flow_style():
            value.fa.set_flow_style()  # written as the value it replaces was: {a: 1}, [..]
        target[key] = value
    elif key in target:
        del target[key]


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def parse_value(text: str) -> Any:
    """A form cell's value: JSON when it parses (``168``, ``true``, ``{"a": 1}``), else the text.

    ``007`` is not JSON, so it stays the string "007", as YAML's string-typed fields read it.
    """
    stripped = text.strip()
    if not stripped:
        return ""
    try:
        value = jsontext.loads(stripped)
    except ValueError:
        return text
    return value if _finite(value) else text


def _finite(value: Any) -> bool:
    """No NaN or infinity anywhere in ``value``: Python's JSON reader takes ``NaN``,
    ``Infinity`` and ``1e400``, which JSON has not (and a pack refuses: "must be a finite
    number"), so such a cell is text."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return False
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return True


def format_value(value: Any) -> str:
    """The inverse of :func:`parse_value` for showing a stored value in a form cell (one line:
    a browser drops the line breaks of an input's value, so a text with one is shown as a
    JSON string, and null as ``null``, not as an empty cell that saves as "")."""
    if isinstance(value, str):
        if "\n" in value or "\r" in value or parse_value(value) != value:
            return json.dumps(value, ensure_ascii=False)  # "168", "true": kept a string
        return value
    return json.dumps(value, ensure_ascii=False)


def _document(text: str) -> YamlDocument:
    """The text read the way validation reads it (libyaml events, YAML 1.2, alias limits):
    linear in the text. ruamel's round-trip loader is not: it concatenates a block of
    comments after the last value one line at a time (3.9 MB of trailing comments took
    12 s), so only structured edits, which must keep comments, go through it."""
    doc, issues = load_yaml(text.encode())
    if doc is None:
        raise YamlEditError(f"the YAML does not parse: {issues[0].message if issues else ''}")
    if not isinstance(doc.data, dict):
        raise YamlEditError("the bundle must be a mapping")
    return doc


def _load_plain(text: str) -> dict[str, Any]:
    """The text's plain value, read as :func:`_document` reads it."""
    return _document(text).data


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def outline(text: str, *, document: YamlDocument | None = None) -> dict[str, Any]:
    """Challenges, input sets and cases as far as the text shows them, for the side panel.

    Best effort on text that parses but may not validate: anything malformed is skipped.
    ``document`` is the text's parse when the caller has it already (the validate report's),
    so the text is not parsed twice. Keys read as validation reads them (``007`` is "007").
    """
    if document is None:
        document = _document(text)
    elif not isinstance(document.data, dict):
        raise YamlEditError("the bundle must be a mapping")
    data = document.data
    challenges = []
    for index, item in enumerate(_list(data.get("challenges"))):
        key = (
            _scalar(document, ("challenges", index, "key"), item.get("key")) if isinstance(item, dict) else ""
        )
        if key:
            title = _scalar(document, ("challenges", index, "title"), item.get("title"))
            challenges.append({"key": key, "title": title})
    sets = []
    for s_index, item in enumerate(_list(data.get("input_sets"))):
        key = (
            _scalar(document, ("input_sets", s_index, "key"), item.get("key"))
            if isinstance(item, dict)
            else ""
        )
        if not key:
            continue
        list_name = _case_list(item)
        cases = []
        for c_index, case in enumerate(_list(item.get(list_name))):
            if isinstance(case, dict):
                path = ("input_sets", s_index, list_name, c_index)
                cases.append(
                    {
                        "case_key": _case_key(document, path, case),
                        "challenge_key": _scalar(
                            document, (*path, "challenge_key"), case.get("challenge_key")
                        ),
                        "raw": case,
                    }
                )
        name = _scalar(document, ("input_sets", s_index, "name"), item.get("name"))
        sets.append({"key": key, "name": name, "cases": cases})
    return {"challenges": challenges, "input_sets": sets}


def asset_paths(text: str) -> list[tuple[str, str]]:
    """``(key, path)`` of every asset the text declares (the version's, each challenge's and
    each case's), as far as it parses; ``[]`` when it does not."""
    try:
        data = _load_plain(text)
    except YamlEditError:
        return []
    version = data.get("version")
    holders = [version] if isinstance(version, dict) else []
    holders += _list(data.get("challenges"))
    for input_set in _list(data.get("input_sets")):
        if isinstance(input_set, dict):
            holders += _list(input_set.get("cases")) + _list(input_set.get("items"))
    return [
        (str(asset.get("key") or ""), asset["path"].strip())
        for holder in holders
        if isinstance(holder, dict)
        for asset in _list(holder.get("assets"))
        if isinstance(asset, dict) and isinstance(asset.get("path"), str) and asset["path"].strip()
    ]


def find_case(text: str, *, input_set_key: str, case_key: str) -> dict[str, Any] | None:
    for input_set in outline(text)["input_sets"]:
        if input_set["key"] == input_set_key:
            for case in input_set["cases"]:
                if case["case_key"] == case_key:
                    found = _plain(case["raw"])
                    found["challenge_key"] = case["challenge_key"]
                    found["case_key"] = case["case_key"]
                    found.pop("item_key", None)  # the form edits the effective key
                    return found
    return None
