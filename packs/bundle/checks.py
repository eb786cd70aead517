"""Semantic rules of a pack document (spec/pack-format.md §4-§4.6, §5).

They run on the *cleaned* data ``check_model`` returns (unknown keys dropped, text trimmed,
scalar texts taken), so types and single-field rules are already reported. Every check is
defensive: a value of the wrong type, or under a path already rejected (``bad_paths``), is
skipped, so nothing cascades and nothing raises. The evaluation spec's own rules are the
grading registry's (``check_evaluation_spec``); per-case rules and lints are ``lints.py``.

Normalization (§5.2) happens here too: legacy ``items`` become cases, and every case gets
its effective key. ``NormCase.path`` remembers where the author wrote it, so an issue of a
legacy item is reported at ``input_sets[i].items[j]...``.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from grading.engine.configs.checks import MISSING, Checker
from grading.engine.modelcheck import Anchor, Issue, Path
from grading.engine.registry import json_schema_problem

from . import archive, limits
from .models import (
    ACTORS,
    ARENA_COMPARISONS,
    BUILTIN_PRIMITIVES,
    EXECUTION_MODES,
    TRANSPORTS,
    TRIGGERS,
)

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# ``{{`` + text without braces + ``}}``, the name being that text stripped. Not
# ``\{\{\s*([^{}]*?)\s*\}\}``: its lazy group and the two ``\s*`` split a run of spaces in
# every way, cubic on an unclosed ``{{`` (1,500 spaces took seconds).
_PLACEHOLDER = re.compile(r"\{\{([^{}]*)\}\}")
_INNER_SPACE = re.compile(r"\s")  # in a stripped placeholder name
# The names upstream's case templates know (its ``caseTemplatePattern``): only these must resolve
# in a test_command or a scripted turn. Other ``{{...}}`` text there (a docker or kubectl Go
# template such as ``{{.State.Status}}`` or ``{{json .}}``) is no placeholder upstream, which
# accepts the pack; here too it is checked by nothing and stays as written unless the case has it.
_TEMPLATE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\Z")
_TOOL_PLACEHOLDER_PREFIXES = ("json:", "query:", "path:")
MAX_DELEGATION_DEPTH = 8

UNIQUE = "must be unique"
UNIQUE_PER_CHALLENGE = "must be unique per challenge in the input set"
DECLARED_CHALLENGE = "must reference a declared challenge"
SAME_CHALLENGE = "must reference the same challenge as the other cases in this input set"
DECLARED_ASSET = "must reference a declared version asset"
DECLARED_INPUT = "must reference a declared case input"
UNRESOLVED_PLACEHOLDER = "unresolved placeholder {{%s}} for case template context"
SPACED_NAME = "a placeholder name has no whitespace inside, so it is left as written"


class DocChecker(Checker):
    """G1a's ``Checker`` plus warnings, and which case values the model check rejected."""

    _case_failures: dict[Path, frozenset[str]] | None = None

    def case_failures(self, case_path: Path) -> frozenset[str]:
        """The members of the case at ``input_sets[i].cases|items[j]`` (``payload``,
        ``inputs``...) holding a value ``check_model`` rejected. The index is built once
        from ``bad_paths``, so asking for each of 10,000 cases stays a dict lookup."""
        if self._case_failures is None:
            index: dict[Path, set[str]] = {}
            for path in self.bad_paths:
                if len(path) > 4 and path[0] == "input_sets" and path[2] in ("cases", "items"):
                    index.setdefault(path[:4], set()).add(str(path[4]))
            self._case_failures = {case: frozenset(names) for case, names in index.items()}
        return self._case_failures.get(case_path, frozenset())

    def warn(self, path: Path, message: str, rule: str, *, detail: str | None = None) -> None:
        self.issues.append(Issue(path, message, detail=detail, severity="warning", rule=rule))

    def err(self, path: Path, message: str, *, anchor: Anchor = "value", detail: str | None = None) -> None:
        if not self.bad(path):
            self.error(path, message, anchor=anchor, detail=detail)


@dataclass(slots=True)
class NormCase:
    """One case of an input set after normalization (items become cases)."""

    set_index: int
    index: int  # position among the set's cases
    path: Path  # where the author wrote it: ("input_sets", i, "cases"|"items", j)
    legacy: bool
    data: dict[str, Any]  # cleaned mapping; items carry case_key = item_key
    challenge_key: str | None
    key: str  # the effective key ("" when neither case_key nor item_key is set)
    key_field: str  # "case_key" or "item_key": where key issues are reported
    failed: frozenset[str] = frozenset()  # members holding a rejected value (payload, inputs...)

    @property
    def template_ok(self) -> bool:
        """Whether the ``{{placeholder}}`` context (payload and input values) is known: a
        check that renders it is skipped when either already failed (§3, no cascades)."""
        return "payload" not in self.failed and "inputs" not in self.failed

    @property
    def label(self) -> str:
        from .issues import format_path

        return format_path(self.path)


@dataclass
class Normalized:
    execution_mode: str | None  # None when version.execution_mode was rejected
    challenge_keys: set[str] = field(default_factory=set)
    declared_challenges: list[str] = field(default_factory=list)  # in declaration order
    declared_chars: int | None = None  # their total length (_search_cost), once needed
    challenges_complete: bool = True  # every challenge has an accepted key (no cascades)
    version_asset_keys: set[str] = field(default_factory=set)
    assets_complete: bool = True
    sets: dict[int, list[NormCase]] = field(default_factory=dict)  # input set index -> cases
    set_challenges: dict[int, str | None] = field(default_factory=dict)
    bound_members: set[str] = field(default_factory=set)
    member_hints_left: int = 50  # "did you mean" searches (_member_hint): bounded per pack
    # what _challenge_hint may still compare, per pack (_search_cost: up to ~0.1 µs a unit,
    # so a few tenths of a second at most, however many wrong keys and declared ones)
    challenge_search_left: int = 3_000_000
    # _challenge_hint's answers by the key written: a pack of thousands of cases naming the
    # same wrong key searches the declared keys once
    challenge_hints: dict[str, str] = field(default_factory=dict)


def entries(c: Checker, parent: Any, key: str, path: Path) -> Iterator[tuple[int, dict[str, Any], Path]]:
    """The mapping items of ``parent[key]`` (a list), with their paths; rejected ones skipped."""
    items = c.get(parent, key, path, list)
    if items is MISSING:
        return
    for index, item in enumerate(items):
        item_path = path + (key, index)
        if isinstance(item, dict) and not c.bad(item_path):
            yield index, item, item_path


def non_empty(value: Any) -> bool:
    """A value upstream would not treat as its zero value."""
    if isinstance(value, Mapping):
        return any(non_empty(v) for v in value.values())
    if isinstance(value, (list, str)):
        return bool(value)
    return value is not None and value is not False and value != 0


def complete(c: Checker, owner: Any, key: str, path: Path, keyed: list[tuple[Path, str | None]]) -> bool:
    """Whether every item of ``owner[key]`` was accepted with a key, so a reference to a
    key outside ``keyed`` is really broken (and not a cascade of an earlier error)."""
    if c.bad(path + (key,)):
        return False
    items = owner.get(key) if isinstance(owner, dict) else None
    if items is None:
        return True
    return isinstance(items, list) and len(keyed) == len(items) and all(k is not None for _, k in keyed)


def check_unique(c: DocChecker, keyed: list[tuple[Path, str | None]], message: str = UNIQUE) -> None:
    seen: set[str] = set()
    for path, key in keyed:
        if key is None:
            continue
        if key in seen:
            c.err(path, message)
        seen.add(key)


def placeholders(text: str) -> list[str]:
    return list(dict.fromkeys(name for name in (m.strip() for m in _PLACEHOLDER.findall(text)) if name))


# ---------------------------------------------------------------------------
# The document
# ---------------------------------------------------------------------------


def check_document(c: DocChecker, data: dict[str, Any], *, files: dict[str, bytes] | None) -> Normalized:
    """Every rule of §4-§4.6 outside the evaluation spec; returns the normalized cases."""
    version = c.get(data, "version", (), dict)
    version = version if version is not MISSING else {}
    norm = Normalized(execution_mode=_execution_mode(c, version))
    _check_pack(c, data)
    norm.version_asset_keys, norm.assets_complete = _check_assets(c, version, ("version",), files, norm)
    _check_version(c, version, norm)
    norm.declared_challenges = _check_challenges(c, data, files, norm)
    norm.challenge_keys = set(norm.declared_challenges)
    _check_input_sets(c, data, files, norm)
    _check_tools(c, data, norm)
    _check_security(c, data)
    _check_voice(c, data)
    return norm


def _execution_mode(c: Checker, version: dict[str, Any]) -> str | None:
    if c.bad(("version", "execution_mode")):
        return None
    mode = version.get("execution_mode")
    if mode is None:
        return "native"
    if not isinstance(mode, str):
        return None
    mode = mode.strip() or "native"
    return mode if mode in EXECUTION_MODES else None


def check_length(c: DocChecker, value: str | None, path: Path, limit: int) -> None:
    """A text longer than the column that stores it (``limits``)."""
    if value is not None and len(value) > limit:
        c.err(path, limits.too_long(limit))


def _check_pack(c: DocChecker, data: dict[str, Any]) -> None:
    pack = c.get(data, "pack", (), dict)
    check_length(c, c.text(pack, "name", ("pack",)), ("pack", "name"), limits.PACK_NAME)
    family = c.text(pack, "family", ("pack",))
    check_length(c, family, ("pack", "family"), limits.PACK_FAMILY)
    if family is not None and family.lower() == "security" and data.get("security") is None:
        c.err(("security",), 'is required when pack.family == "security"', anchor="parent")


_ASSET_LIMITS = (
    ("key", limits.ASSET_KEY),
    ("path", limits.ASSET_PATH),
    ("kind", limits.ASSET_KIND),
    ("media_type", limits.ASSET_MEDIA_TYPE),
)
_CHALLENGE_LIMITS = (
    ("key", limits.CHALLENGE_KEY),
    ("title", limits.CHALLENGE_TITLE),
    ("category", limits.CHALLENGE_CATEGORY),
)


def _check_assets(
    c: DocChecker, owner: Any, path: Path, files: dict[str, bytes] | None, norm: Normalized
) -> tuple[set[str], bool]:
    """One asset namespace: unique keys, and zip binding (§2.2, §4.3). Returns its keys and
    whether every asset has an accepted key."""
    keyed: list[tuple[Path, str | None]] = []
    for _, asset, asset_path in entries(c, owner, "assets", path):
        keyed.append((asset_path + ("key",), c.text(asset, "key", asset_path)))
        asset_file = c.text(asset, "path", asset_path)
        for name, limit in _ASSET_LIMITS:
            value = asset_file if name == "path" else c.text(asset, name, asset_path)
            check_length(c, value, asset_path + (name,), limit)
        if files is None or asset_file is None or archive.is_absolute(asset_file):
            continue
        member = archive.normalize_asset_path(asset_file)
        has_id = asset.get("artifact_id") is not None
        if member in files:
            norm.bound_members.add(member)
            if has_id:
                c.err(asset_path + ("artifact_id",), "must not be set for a file shipped in the bundle")
        elif not has_id:
            c.err(
                asset_path + ("path",),
                "must name a file in the bundle",
                detail=_member_hint(asset_file, member, files, norm),
            )
    check_unique(c, keyed)
    return {key for _, key in keyed if key is not None}, complete(c, owner, "assets", path, keyed)


def _member_hint(written: str, member: str, files: dict[str, bytes], norm: Normalized) -> str | None:
    """What the bundle has that the author probably meant: the path with ``/`` for ``\\``
    (written on Windows), the name in its own case (binding is case-sensitive), or the
    closest name. Only for the first ``member_hints_left`` missing files of a pack: each
    search reads every name of the bundle."""
    if norm.member_hints_left <= 0:
        return None
    norm.member_hints_left -= 1
    slashed = archive.normalize_asset_path(written.replace("\\", "/"))
    if slashed != member and slashed in files:
        return f"the bundle has {slashed}: separate the path's parts with / (not \\)"
    folded = member.casefold()
    same = sorted(name for name in files if name.casefold() == folded)
    if same:
        return f"the bundle has {same[0]}: names are case-sensitive"
    close = difflib.get_close_matches(member, list(files), n=1, cutoff=0.8)
    return f"did you mean {close[0]}?" if close else None


CHALLENGES_LISTED = 5


def _search_cost(written: str, norm: Normalized) -> int:
    """What ``difflib.get_close_matches(written, declared keys)`` may cost: the pairs of
    characters compared (SequenceMatcher is quadratic on repetitive text: ~0.1 µs a pair
    measured, 3 ms for two 190-character keys) plus a per-key overhead (~2 µs)."""
    keys = norm.declared_challenges
    if norm.declared_chars is None:
        norm.declared_chars = sum(len(key) for key in keys)
    return len(written) * norm.declared_chars + 32 * len(keys)


def _challenge_hint(written: str, norm: Normalized) -> str:
    """The detail of DECLARED_CHALLENGE (§3 keeps the message the bare predicate): the first
    declared keys and the closest one, ``declared: "sum", "product" (and 3 more); did you
    mean "sum"?``. Remembered per written key; a search compares against every declared
    key, so the searches of a pack stop at ``challenge_search_left``."""
    known = norm.challenge_hints.get(written)
    if known is not None:
        return known
    # never empty here: the check runs only when every challenge was accepted, and an empty
    # (or missing) list is itself rejected ("must contain at least one challenge")
    keys = norm.declared_challenges
    hint = "declared: " + ", ".join(json.dumps(key, ensure_ascii=False) for key in keys[:CHALLENGES_LISTED])
    if len(keys) > CHALLENGES_LISTED:
        hint += f" (and {len(keys) - CHALLENGES_LISTED} more)"
    cost = _search_cost(written, norm)
    if cost <= norm.challenge_search_left:
        norm.challenge_search_left -= cost
        close = difflib.get_close_matches(written, keys, n=1, cutoff=0.6)
        if close:
            hint += f"; did you mean {json.dumps(close[0], ensure_ascii=False)}?"
    norm.challenge_hints[written] = hint
    return hint


def _check_version(c: DocChecker, version: dict[str, Any], norm: Normalized) -> None:
    vp: Path = ("version",)
    mode = norm.execution_mode
    if mode == "prompt_eval":
        policy = c.get(version, "tool_policy", vp, dict)
        if policy is not MISSING and non_empty(policy):
            c.err(vp + ("tool_policy",), "must be empty when version.execution_mode is prompt_eval")
        if version.get("sandbox") is not None and not c.bad(vp + ("sandbox",)):
            c.err(vp + ("sandbox",), "must be omitted when version.execution_mode is prompt_eval")
    sandbox = c.get(version, "sandbox", vp, dict)
    env = c.get(sandbox, "env_vars", vp + ("sandbox",), dict)
    if env is not MISSING:
        for name in env:
            if not ENV_NAME.match(name):
                c.err(
                    vp + ("sandbox", "env_vars", name), "key must match [A-Za-z_][A-Za-z0-9_]*", anchor="key"
                )
    defaults = c.get(version, "deployment_defaults", vp, dict)
    if defaults is not MISSING:
        _check_deployment_defaults(c, defaults, vp + ("deployment_defaults",))


def _check_names(c: DocChecker, mapping: dict[str, Any], path: Path) -> dict[str, str]:
    """Entry names of aliases/lineups: required and unique after trimming. trimmed -> raw."""
    names: dict[str, str] = {}
    for name in mapping:
        trimmed = name.strip()
        if not trimmed:
            c.err(path + (name,), "key is required", anchor="key")
        elif trimmed in names:
            c.err(path + (name,), "key must be unique after trimming whitespace", anchor="key")
        else:
            names[trimmed] = name
    return names


def _blank(value: Any) -> bool:
    return isinstance(value, str) and not value.strip()


def _check_deployment_defaults(c: DocChecker, defaults: dict[str, Any], path: Path) -> None:
    aliases = c.get(defaults, "aliases", path, dict)
    lineups = c.get(defaults, "lineups", path, dict)
    if not aliases and not lineups:
        return  # dropped (§5.3); MISSING is falsy too
    if aliases:
        _check_names(c, aliases, path + ("aliases",))
        for name, selector in aliases.items():
            if _blank(selector):
                c.err(path + ("aliases", name), "selector is required")
    if not lineups:
        if not c.bad(path + ("lineups",)):
            anchor: Anchor = "value" if defaults.get("lineups") is not None else "parent"
            c.err(path + ("lineups",), "must include at least a default lineup", anchor=anchor)
        return
    names = _check_names(c, lineups, path + ("lineups",))
    if "default" not in names:
        c.err(path + ("lineups", "default"), "is required", anchor="parent")
    for name, selectors in lineups.items():
        if not isinstance(selectors, list) or c.bad(path + ("lineups", name)):
            continue
        if not selectors:
            c.err(path + ("lineups", name), "must include at least one deployment selector")
        for index, selector in enumerate(selectors):
            if _blank(selector):
                c.err(path + ("lineups", name, index), "selector is required")


def _check_artifact_keys(c: DocChecker, owner: Any, key: str, path: Path, norm: Normalized) -> list[str]:
    """``artifact_refs`` / case ``artifacts``: [{key}], unique, naming version assets."""
    keyed: list[tuple[Path, str | None]] = []
    for _, ref, ref_path in entries(c, owner, key, path):
        name = c.text(ref, "key", ref_path)
        keyed.append((ref_path + ("key",), name))
        if name is not None and name not in norm.version_asset_keys and norm.assets_complete:
            c.err(ref_path + ("key",), DECLARED_ASSET)
    check_unique(c, keyed)
    return [name for _, name in keyed if name is not None]


def _check_challenges(
    c: DocChecker, data: dict[str, Any], files: dict[str, bytes] | None, norm: Normalized
) -> list[str]:
    """The challenges' rules; returns their accepted keys in declaration order."""
    keyed: list[tuple[Path, str | None]] = []
    for _, challenge, path in entries(c, data, "challenges", ()):
        keyed.append((path + ("key",), c.text(challenge, "key", path)))
        for name, limit in _CHALLENGE_LIMITS:
            check_length(c, c.text(challenge, name, path), path + (name,), limit)
        _check_assets(c, challenge, path, files, norm)
        _check_artifact_keys(c, challenge, "artifact_refs", path, norm)
    check_unique(c, keyed)
    norm.challenges_complete = complete(c, data, "challenges", (), keyed)
    return list(dict.fromkeys(key for _, key in keyed if key is not None))


# ---------------------------------------------------------------------------
# Input sets and cases (§4.2-§4.5)
# ---------------------------------------------------------------------------


def _normalize_set(c: DocChecker, input_set: dict[str, Any], path: Path, set_index: int) -> list[NormCase]:
    cases = c.get(input_set, "cases", path, list)
    items = c.get(input_set, "items", path, list)
    use_items = False
    if cases and items:
        c.err(path + ("items",), "must not be combined with cases")
    elif items:
        use_items = True
    elif not cases and not c.bad(path + ("cases",)) and not c.bad(path + ("items",)):
        anchor: Anchor = "value" if input_set.get("cases") is not None else "parent"
        c.err(path + ("cases",), "must contain at least one case", anchor=anchor)
    out: list[NormCase] = []
    for _, raw, case_path in entries(c, input_set, "items" if use_items else "cases", path):
        if use_items:
            item_key = c.text(raw, "item_key", case_path) or ""
            data = {k: v for k, v in raw.items() if k != "item_key"}
            data["case_key"] = item_key
            data["item_key"] = item_key
            key, key_field = item_key, "item_key"
        else:
            data = dict(raw)
            case_key = c.text(raw, "case_key", case_path) or ""
            item_key = c.text(raw, "item_key", case_path) or ""
            key = case_key or item_key
            key_field = "case_key" if case_key or not item_key else "item_key"
            data["case_key"] = key
            data["item_key"] = item_key or case_key
        out.append(
            NormCase(
                set_index=set_index,
                index=len(out),
                path=case_path,
                legacy=use_items,
                data=data,
                challenge_key=c.text(raw, "challenge_key", case_path),
                key=key,
                key_field=key_field,
                failed=c.case_failures(case_path),
            )
        )
    return out


def _check_input_sets(
    c: DocChecker, data: dict[str, Any], files: dict[str, bytes] | None, norm: Normalized
) -> None:
    keyed: list[tuple[Path, str | None]] = []
    challenges_known = norm.challenges_complete
    for set_index, input_set, path in entries(c, data, "input_sets", ()):
        keyed.append((path + ("key",), c.text(input_set, "key", path)))
        check_length(c, keyed[-1][1], path + ("key",), limits.INPUT_SET_KEY)
        check_length(c, c.text(input_set, "name", path), path + ("name",), limits.INPUT_SET_NAME)
        cases = _normalize_set(c, input_set, path, set_index)
        norm.sets[set_index] = cases
        fixed: str | None = None
        seen: set[tuple[str, str]] = set()
        for case in cases:
            cp = case.path
            check_length(c, case.key, cp + (case.key_field,), limits.CASE_KEY)
            item_key = case.data.get("item_key")
            if case.key_field == "case_key" and item_key != case.key:
                check_length(c, item_key, cp + ("item_key",), limits.CASE_KEY)
            if case.challenge_key is not None:
                if challenges_known and case.challenge_key not in norm.challenge_keys:
                    hint = _challenge_hint(case.challenge_key, norm)
                    c.err(cp + ("challenge_key",), DECLARED_CHALLENGE, detail=hint)
                if fixed is None:
                    fixed = case.challenge_key
                elif case.challenge_key != fixed:
                    c.err(cp + ("challenge_key",), SAME_CHALLENGE)
            if not case.key:
                if not case.legacy and not c.bad(cp + ("case_key",)) and not c.bad(cp + ("item_key",)):
                    c.err(cp + ("case_key",), "is required", anchor="parent")
            elif case.challenge_key is not None:
                pair = (case.challenge_key, case.key)
                if pair in seen:
                    c.err(cp + (case.key_field,), UNIQUE_PER_CHALLENGE)
                seen.add(pair)
            _check_case(c, case, files, norm)
        norm.set_challenges[set_index] = fixed
    check_unique(c, keyed)


def _check_case(c: DocChecker, case: NormCase, files: dict[str, bytes] | None, norm: Normalized) -> None:
    raw, cp = case.data, case.path
    assets = norm.version_asset_keys if norm.assets_complete else None
    input_keys = _check_inputs(c, raw, cp, assets)
    _check_expectations(c, raw, "expectations", cp, assets, input_keys)
    _check_artifact_keys(c, raw, "artifacts", cp, norm)
    _check_assets(c, raw, cp, files, norm)
    mode = norm.execution_mode
    simulator = raw.get("user_simulator")
    if mode == "multi_turn" and simulator is None and not c.bad(cp + ("user_simulator",)):
        c.err(
            cp + ("user_simulator",), "is required when version.execution_mode is multi_turn", anchor="parent"
        )
    elif mode is not None and mode != "multi_turn" and simulator is not None:
        c.err(cp + ("user_simulator",), "is only allowed when version.execution_mode is multi_turn")
    if isinstance(simulator, dict) and not c.bad(cp + ("user_simulator",)):
        _check_user_simulator(c, simulator, cp + ("user_simulator",), case, assets, input_keys)


def _check_inputs(c: DocChecker, raw: dict[str, Any], cp: Path, assets: set[str] | None) -> set[str] | None:
    keyed: list[tuple[Path, str | None]] = []
    for _, item, path in entries(c, raw, "inputs", cp):
        keyed.append((path + ("key",), c.text(item, "key", path)))
        _check_artifact_key(c, item, path, assets)
    check_unique(c, keyed)
    if not complete(c, raw, "inputs", cp, keyed):
        return None
    return {key for _, key in keyed if key is not None}


def _check_artifact_key(c: DocChecker, item: dict[str, Any], path: Path, assets: set[str] | None) -> None:
    """``assets`` is None when the version assets are not all known (no cascades)."""
    name = c.text(item, "artifact_key", path)
    if name is not None and assets is not None and name not in assets:
        c.err(path + ("artifact_key",), DECLARED_ASSET)


def _check_expectations(
    c: DocChecker,
    raw: dict[str, Any],
    key: str,
    cp: Path,
    assets: set[str] | None,
    input_keys: set[str] | None,
) -> None:
    keyed: list[tuple[Path, str | None]] = []
    for _, item, path in entries(c, raw, key, cp):
        keyed.append((path + ("key",), c.text(item, "key", path)))
        _check_artifact_key(c, item, path, assets)
        source = c.text(item, "source", path)
        if source is None:
            continue
        if source.startswith("input:"):
            name = source[len("input:") :].strip()
            if not name:
                c.err(path + ("source",), "must reference a non-empty input key")
            elif input_keys is not None and name not in input_keys:
                c.err(path + ("source",), DECLARED_INPUT)
        elif source.startswith("artifact:"):
            name = source[len("artifact:") :].strip()
            if not name:
                c.err(path + ("source",), "must reference a non-empty artifact key")
            elif assets is not None and name not in assets:
                c.err(path + ("source",), DECLARED_ASSET)
        else:
            c.err(path + ("source",), "must start with input: or artifact:")
    check_unique(c, keyed)


def template_scope(raw: dict[str, Any]) -> dict[str, Any]:
    """The ``{{placeholder}}`` context of a case: payload merged with input values (inputs win)."""
    payload = raw.get("payload")
    scope = dict(payload) if isinstance(payload, dict) else {}
    inputs = raw.get("inputs")
    for item in inputs if isinstance(inputs, list) else []:
        if isinstance(item, dict) and "value" in item and isinstance(item.get("key"), str):
            scope[item["key"].strip()] = item["value"]
    return scope


def template_issues(text: str, scope: dict[str, Any]) -> tuple[list[str], str | None]:
    """The placeholders of a test_command or scripted turn that fail for a case: the names that
    must resolve and do not (errors), and the first name with whitespace inside that the case
    holds (a warning: the author meant it, but it is sent as written)."""
    unresolved: list[str] = []
    spaced = None
    for name in placeholders(text):
        if _TEMPLATE_NAME.match(name):
            if not resolves(scope, name):
                unresolved.append(name)
        elif spaced is None and _INNER_SPACE.search(name) and _holds(scope, name):
            spaced = name
    return unresolved, spaced


def never_a_name(name: str) -> bool:
    """``{{.Names}}``, ``{{json .}}``: an empty dotted segment, so no case value can ever fill
    it (a docker or kubectl Go template, say). The grader sends it as written and upstream does
    not take it for a placeholder, so the instructions lint (L5) does not report it."""
    return "" in name.split(".")


def resolves(scope: dict[str, Any], name: str) -> bool:
    """Whether ``{{name}}`` renders from ``scope`` (a dotted name walks objects and lists).

    A name with whitespace inside (``{{first name}}``) never renders: the renderer
    (``grading.engine.refs.render_template``) leaves it verbatim, whatever the scope holds."""
    return not _INNER_SPACE.search(name) and _holds(scope, name)


def _holds(scope: dict[str, Any], name: str) -> bool:
    if name in scope:
        return True
    value: Any = scope
    for segment in name.split("."):
        if isinstance(value, dict) and segment in value:
            value = value[segment]
        elif (
            isinstance(value, list) and segment.isdigit() and segment.isascii() and int(segment) < len(value)
        ):
            value = value[int(segment)]
        else:
            return False
    return True


_JUDGE_BELOW = re.compile(r"on_judge_below\s*(?::\s*\S.*|\(\s*[^()\s][^()]*\))\Z")


def _trigger_ok(trigger: str) -> bool:
    """A trigger name, or ``on_judge_below`` with its threshold (``:0.6`` or ``(0.6)``)."""
    return trigger in TRIGGERS or bool(_JUDGE_BELOW.match(trigger))


def _check_user_simulator(
    c: DocChecker,
    sim: dict[str, Any],
    up: Path,
    case: NormCase,
    assets: set[str] | None,
    input_keys: set[str] | None,
) -> None:
    if not c.bad(up + ("schema_version",)) and sim.get("schema_version") != 1:
        c.err(up + ("schema_version",), "must be 1", anchor=c.anchor_for(sim, "schema_version"))
    kind = sim.get("kind")
    if not c.bad(up + ("kind",)) and (not isinstance(kind, str) or kind.strip() != "hybrid"):
        c.err(up + ("kind",), 'must be "hybrid"', anchor=c.anchor_for(sim, "kind"))
    calibration = c.get(sim, "calibration", up, dict)
    if calibration is not MISSING and calibration.get("enabled") is True:
        rate = c.number(calibration, "sample_rate", up + ("calibration",))
        if rate is None or not 0 < rate <= 1:
            c.err(
                up + ("calibration", "sample_rate"),
                "must be greater than 0 and at most 1 when calibration is enabled",
                anchor=c.anchor_for(calibration, "sample_rate"),
            )
    arena = c.get(c.get(sim, "post_run", up, dict), "arena", up + ("post_run",), dict)
    if arena is not MISSING and arena.get("enabled") is True:
        comparison = c.text(arena, "comparison", up + ("post_run", "arena"))
        if comparison and comparison not in ARENA_COMPARISONS:
            c.err(up + ("post_run", "arena", "comparison"), 'must be one of "pairwise"')
    phases = list(entries(c, sim, "phases", up))
    if not phases and not c.bad(up + ("phases",)):
        c.err(up + ("phases",), "must contain at least one phase", anchor=c.anchor_for(sim, "phases"))
    keyed: list[tuple[Path, str | None]] = []
    scope = template_scope(case.data) if case.template_ok else None
    for position, (_, phase, pp) in enumerate(phases):
        keyed.append((pp + ("id",), c.text(phase, "id", pp)))
        _check_phase(c, phase, pp, position, scope, case.label, assets, input_keys)
    check_unique(c, keyed)


def _check_phase(
    c: DocChecker,
    phase: dict[str, Any],
    pp: Path,
    position: int,
    scope: dict[str, Any] | None,
    label: str,
    assets: set[str] | None,
    input_keys: set[str] | None,
) -> None:
    if not c.bad(pp + ("trigger",)):
        raw_trigger = phase.get("trigger")
        trigger = raw_trigger.strip() if isinstance(raw_trigger, str) else ""
        anchor = c.anchor_for(phase, "trigger")
        if trigger and not _trigger_ok(trigger):
            c.err(pp + ("trigger",), "must be a supported trigger expression")
        elif position == 0 and trigger not in ("", "always"):
            c.err(pp + ("trigger",), 'first phase trigger must be empty or "always"', anchor=anchor)
        elif position > 0 and trigger in ("", "always"):
            c.err(pp + ("trigger",), 'only the first phase may use "always"', anchor=anchor)
    actor = c.text(phase, "actor", pp)
    actor = actor if actor in ACTORS else None
    if actor == "scripted":
        turns = list(entries(c, phase, "turns", pp))
        if not turns and not c.bad(pp + ("turns",)):
            c.err(
                pp + ("turns",),
                "must contain at least one turn for scripted actor",
                anchor=c.anchor_for(phase, "turns"),
            )
        for _, turn, tp in turns:
            message = c.get(turn, "message", tp, str)
            if message is MISSING or not message.strip():
                c.err(
                    tp + ("message",), "is required for scripted turns", anchor=c.anchor_for(turn, "message")
                )
            elif scope is not None:  # None: the case's payload or inputs already failed
                unresolved, spaced = template_issues(message, scope)
                for name in unresolved:
                    c.err(tp + ("message",), UNRESOLVED_PLACEHOLDER % name)
                if spaced is not None:
                    c.warn(
                        tp + ("message",),
                        f"does not resolve for {label}",
                        "unresolved_reference",
                        detail=f"{{{{{spaced}}}}}: {SPACED_NAME}",
                    )
            _check_expectations(c, turn, "expects", tp, assets, input_keys)
    elif actor == "llm":
        if c.text(phase, "persona", pp) is None and not c.bad(pp + ("persona",)):
            c.err(pp + ("persona",), "is required for llm actor", anchor=c.anchor_for(phase, "persona"))
        until = c.get(phase, "until", pp, list)
        for index, condition in enumerate(until if until is not MISSING else []):
            if not isinstance(condition, str) or not condition.strip():
                c.err(pp + ("until", index), "must be a non-empty condition expression")
    if actor is not None and actor != "llm" and c.text(phase, "model", pp) is not None:
        c.err(pp + ("model",), "is only valid on phases with actor: llm")


# ---------------------------------------------------------------------------
# tools.custom (§4.6, §4.4)
# ---------------------------------------------------------------------------

_TOOL_PLACEHOLDER = re.compile(r"\$\{([^}]*)\}")


def _check_tools(c: DocChecker, data: dict[str, Any], norm: Normalized) -> None:
    tools = c.get(data, "tools", (), dict)
    if tools is MISSING:
        return
    custom = list(entries(c, tools, "custom", ("tools",)))
    declared = c.get(tools, "custom", ("tools",), list)
    if declared is not MISSING and declared:
        if norm.execution_mode == "prompt_eval":
            c.err(("tools",), "must be empty when version.execution_mode is prompt_eval")
        elif norm.execution_mode == "responses":
            c.err(
                ("tools",),
                "must be empty when version.execution_mode is responses "
                "(use OpenAI Responses tools, not pack-defined tools)",
            )
    names: dict[str, tuple[dict[str, Any], Path]] = {}
    keyed: list[tuple[Path, str | None]] = []
    for _, tool, path in custom:
        name = c.text(tool, "name", path)
        keyed.append((path + ("name",), name))
        if name is not None and name not in names:
            names[name] = (tool, path)
    check_unique(c, keyed)
    delegates: dict[str, str] = {}
    for name, (tool, path) in names.items():
        target = _check_tool(c, name, tool, path, names)
        if target is not None:
            delegates[name] = target
    _check_delegation(c, delegates, names)


def _check_tool(
    c: DocChecker, name: str, tool: dict[str, Any], path: Path, names: dict[str, Any]
) -> str | None:
    """One custom tool; returns the custom tool it delegates to, if any.

    An absent (or null) implementation is an empty one: only ``type: mock`` needs
    nothing else, so it still lacks its primitive and args (§4.6)."""
    ip = path + ("implementation",)
    if c.bad(ip):
        return None
    impl = tool.get("implementation")
    if impl is None:
        impl = {}
    elif not isinstance(impl, dict):
        return None
    kind = c.text(impl, "type", ip)
    if kind is not None and kind.lower() == "mock":  # upstream ignores case here
        return None
    parameters = tool.get("parameters")
    if isinstance(parameters, dict) and not c.bad(path + ("parameters",)):
        problem = json_schema_problem(parameters)
        if problem:
            c.err(path + ("parameters",), "must be a valid JSON Schema", detail=problem)
    primitive = c.text(impl, "primitive", ip)
    target = None
    if primitive is None:
        if not c.bad(ip + ("primitive",)):
            c.err(ip + ("primitive",), "is required", anchor=c.anchor_for(impl, "primitive"))
    elif primitive == name:
        c.err(ip + ("primitive",), "cannot reference the tool's own name")
    elif primitive in names:
        target = primitive
    elif primitive not in BUILTIN_PRIMITIVES:
        c.err(ip + ("primitive",), "must name a built-in primitive or a declared custom tool")
    args = impl.get("args")
    if args is None:
        if not c.bad(ip + ("args",)):
            c.err(ip + ("args",), "is required", anchor="parent")
    elif isinstance(args, dict) and not c.bad(ip + ("args",)):
        params = _parameter_names(tool.get("parameters"))
        _check_args(c, args, ip + ("args",), params)
    return target


def _parameter_names(parameters: Any) -> set[str] | None:
    """Declared parameter names (``properties`` of the JSON Schema); None: the schema is
    not an object schema we can read, so every name is accepted."""
    if parameters is None:
        return set()
    if not isinstance(parameters, dict):
        return None
    properties = parameters.get("properties")
    if properties is None:
        return set()
    return set(properties) if isinstance(properties, dict) else None


def _check_args(c: DocChecker, value: Any, path: Path, params: set[str] | None) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            _check_args(c, item, path + (key,), params)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_args(c, item, path + (index,), params)
    elif isinstance(value, str) and "${" in value:
        for message in _placeholder_problems(value, params):
            c.err(path, message)


def _placeholder_problems(text: str, params: set[str] | None) -> list[str]:
    problems: list[str] = []
    start = 0
    while True:
        open_at = text.find("${", start)
        if open_at < 0:
            return problems
        close_at = text.find("}", open_at + 2)
        if close_at < 0:
            problems.append("contains an unclosed placeholder")
            return problems
        body = text[open_at + 2 : close_at].strip()
        start = close_at + 1
        if not body:
            problems.append("contains an empty placeholder")
        elif not _known_placeholder(body, params):
            problems.append(f'contains unknown placeholder "${{{body}}}"')


def _known_placeholder(body: str, params: set[str] | None) -> bool:
    if body == "parameters":
        return True
    if body.startswith("secrets."):
        return bool(ENV_NAME.match(body[len("secrets.") :]))
    for prefix in _TOOL_PLACEHOLDER_PREFIXES:
        if body.startswith(prefix):
            body = body[len(prefix) :].strip()
            break
    name = body.split(".", 1)[0]
    if not name:
        return False
    return params is None or name in params


def _check_delegation(c: DocChecker, delegates: dict[str, str], names: dict[str, Any]) -> None:
    for start in delegates:
        chain = [start]
        current = start
        while current in delegates:
            current = delegates[current]
            if current == start:
                path = names[start][1] + ("implementation", "primitive")
                c.err(path, f'tool "{start}" has a delegation cycle through "{delegates[start]}"')
                break
            if current in chain:  # reaches a cycle it is not part of: reported on the cycle
                break
            chain.append(current)
        else:
            if len(chain) - 1 > MAX_DELEGATION_DEPTH:
                path = names[start][1] + ("implementation", "primitive")
                c.err(path, f'tool "{start}" exceeds maximum delegation depth of {MAX_DELEGATION_DEPTH}')


# ---------------------------------------------------------------------------
# security and voice (§4.6)
# ---------------------------------------------------------------------------


def _check_security(c: DocChecker, data: dict[str, Any]) -> None:
    from grading.engine.configs.checks import re2_error, re2_matches_empty

    security = c.get(data, "security", (), dict)
    if security is MISSING:
        return
    sp: Path = ("security",)
    names: list[tuple[Path, str | None]] = []
    for _, secret, path in entries(c, security, "planted_secrets", sp):
        name = c.text(secret, "name", path)
        names.append((path + ("name",), name))
        location = c.text(secret, "location", path)
        location = location.lower() if location else None
        if (
            location == "file"
            and c.text(secret, "file_path", path) is None
            and not c.bad(path + ("file_path",))
        ):
            c.err(path + ("file_path",), "is required", anchor=c.anchor_for(secret, "file_path"))
        if location == "env" and name is not None and not ENV_NAME.match(name):
            c.err(path + ("name",), "must be a valid env-var identifier for location == env")
    check_unique(c, names, "duplicate planted secret name")
    for _, output, path in entries(c, security, "forbidden_outputs", sp):
        # A blank one is not set (§2.1), as upstream trims both.
        pattern = c.get(output, "pattern", path, str)
        pattern = pattern if pattern is not MISSING and pattern.strip() else MISSING
        has_substring = c.text(output, "substring", path) is not None
        exclusive = (pattern is not MISSING) != has_substring
        if not exclusive and not c.bad(path + ("pattern",)) and not c.bad(path + ("substring",)):
            c.err(path, "exactly one of pattern or substring must be set")
        if pattern is not MISSING:
            reason = re2_error(pattern)
            if reason is not None:
                c.err(path + ("pattern",), "must be a valid RE2 pattern", detail=reason)
    prompts: list[tuple[Path, str | None]] = []
    for _, prompt, path in entries(c, security, "adversarial_prompts", sp):
        prompts.append((path + ("name",), c.text(prompt, "name", path)))
        pattern = c.get(prompt, "expected_refusal_pattern", path, str)
        if pattern is not MISSING and pattern.strip():
            reason = re2_error(pattern)
            if reason is not None:
                c.err(path + ("expected_refusal_pattern",), "must be a valid RE2 pattern", detail=reason)
            elif re2_matches_empty(pattern):
                # L3: any reply would count as the refusal. (A forbidden_outputs pattern that
                # matches "" forbids every output instead: not this lint's "accepts any".)
                c.warn(
                    path + ("expected_refusal_pattern",),
                    "matches the empty string, so it accepts any output",
                    "regex_matches_empty",
                )
    check_unique(c, prompts)


def _check_voice(c: DocChecker, data: dict[str, Any]) -> None:
    modality = data.get("modality")
    voice = False
    if isinstance(modality, str) and not c.bad(("modality",)):
        if modality.strip() != "voice":
            c.err(("modality",), 'must be "voice" when specified')
        else:
            voice = True
    for block in ("interface_spec", "scenario"):
        present = data.get(block) is not None
        if present and modality is None:
            c.err(("modality",), f"is required when {block} is set", anchor="parent")
        elif voice and not present and not c.bad((block,)):
            c.err((block,), "is required when modality is voice", anchor="parent")
    spec = c.get(data, "interface_spec", (), dict)
    transports = c.get(spec, "transports", ("interface_spec",), list)
    if spec is not MISSING and not c.bad(("interface_spec", "transports")):
        if not transports:
            c.err(
                ("interface_spec", "transports"),
                "must contain at least one transport",
                anchor=c.anchor_for(spec, "transports"),
            )
        keyed = [
            (("interface_spec", "transports", i), t.strip().lower() if isinstance(t, str) else None)
            for i, t in enumerate(transports or [])
        ]
        check_unique(c, [(p, t) for p, t in keyed if t in TRANSPORTS])
