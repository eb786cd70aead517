"""Structured edits of a draft's YAML that keep its comments and formatting.

ruamel.yaml's round-trip mode keeps comments, key order, flow/block style and quoting of
everything an edit does not touch. Callers validate the text with ``packs.bundle`` first:
these helpers are only used on text that parsed (so alias bombs never reach ruamel).
"""

from __future__ import annotations

import io
import json
import re
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


def _rows(rows: list[dict[str, Any]], keys: tuple[str, ...]) -> CommentedSeq:
    seq = CommentedSeq()
    for row in rows:
        item = CommentedMap()
        for name in keys:
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
        _set_or_drop(target, "inputs", _rows(edit.inputs, ("key", "kind", "value", "artifact_key", "path")))
        _set_or_drop(
            target,
            "expectations",
            _rows(edit.expectations, ("key", "kind", "value", "source", "artifact_key")),
        )
    return _dump(yaml, data)


def delete_case(text: str, *, input_set_key: str, case_key: str) -> str:
    yaml, data, document = _yaml_for(text)
    input_set, set_index = _find_set(data, document, input_set_key, create=False)
    index = None if set_index is None else _case_index(document, set_index, case_key)
    entries = input_set.get(_case_list(input_set))
    if index is None or not isinstance(entries, list):
        raise YamlEditError(f"no case {case_key!r} in input set {input_set_key!r}")
    del entries[index]
    return _dump(yaml, data)


def _set_or_drop(target: CommentedMap, key: str, value: Any) -> None:
    if value:
        if key in target and _plain(target[key]) == _plain(value):
            return  # unchanged: keep its original style and comments
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
        return jsontext.loads(stripped)
    except ValueError:
        return text


def format_value(value: Any) -> str:
    """The inverse of :func:`parse_value` for showing a stored value in a form cell."""
    if isinstance(value, str):
        try:
            jsontext.loads(value)
        except ValueError:
            return value
        return json.dumps(value)  # a string that looks like JSON keeps its quotes
    if value is None:
        return ""
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
