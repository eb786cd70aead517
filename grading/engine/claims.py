"""Deterministic claims ledger (spec/grading.md §8).

The agent's own statements ("I ran the tests", "all 12 tests pass", "saved report.json",
"created 3 files", "I ran `make lint`") are extracted from the final output (else the last
assistant message) and checked against the structured evidence: ``verified`` is True when
the evidence shows it, False when structured evidence contradicts it, None when the channel
that could tell is unavailable (or, for test counts, when no counts exist anywhere).

The patterns below are our own fixed expressions, so Python ``re`` is fine here; no
user-supplied pattern is ever compiled in this module.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from . import jsontext
from .types import Claim, Evidence, GradeContext, ToolCall, as_text

MAX_CLAIMS = 50
DEFAULT_WRITE_TOOL_NAMES = ("Write", "write_file", "create_file", "Edit", "edit_file")
DEFAULT_SHELL_TOOL_NAMES = ("Bash", "bash", "shell", "exec", "run_command", "terminal")
# Tools that are a test run by themselves (the pack tool catalogue's run_tests primitive).
TEST_TOOL_NAMES = ("run_tests",)
PATH_ARG_KEYS = ("file_path", "path", "filename", "file", "target_file", "target", "notebook_path")
QUOTE_MAX = 200

_I = re.IGNORECASE

NUMBER_WORDS = {
    w: i
    for i, w in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
            "twenty",
        ]
    )
}
_NUM = r"(?:\d+|" + "|".join(NUMBER_WORDS) + r")"

# ---------------------------------------------------------------------------
# Sentences
# ---------------------------------------------------------------------------

_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")
_BULLET = re.compile(r"^[ \t]*(?:[-*+\u2022\u2023\u25e6\u25aa\u2043]|\d{1,3}[.)])[ \t]+")
_LINE = re.compile(r"[^\n]*\n?")
_BOUNDARY = re.compile(r"[.!?]+(?=\s|$)")


@dataclass(slots=True)
class Sentence:
    text: str
    start: int  # code-point offsets into the source text
    end: int


def split_sentences(text: str) -> list[Sentence]:
    """Sentences of ``text``: split at ``.``/``!``/``?`` before whitespace, at line breaks and
    at list bullets; fenced code blocks are skipped."""
    out: list[Sentence] = []
    fence: str | None = None
    for m in _LINE.finditer(text):
        line = m.group().rstrip("\r\n")
        if not m.group():
            break
        base = m.start()
        fm = _FENCE.match(line)
        if fence is not None:
            if (
                fm
                and fm.group(1)[0] == fence[0]
                and len(fm.group(1)) >= len(fence)
                and not line[fm.end() :].strip()
            ):
                fence = None
            continue
        if fm:
            fence = fm.group(1)
            continue
        bm = _BULLET.match(line)
        pos = bm.end() if bm else 0
        for b in _BOUNDARY.finditer(line, pos):
            _append_sentence(out, text, base, line, pos, b.end())
            pos = b.end()
        _append_sentence(out, text, base, line, pos, len(line))
    return out


def _append_sentence(out: list[Sentence], text: str, base: int, line: str, start: int, end: int) -> None:
    segment = line[start:end]
    stripped = segment.strip()
    if not stripped:
        return
    lead = len(segment) - len(segment.lstrip())
    s = base + start + lead
    out.append(Sentence(stripped, s, s + len(stripped)))


# ---------------------------------------------------------------------------
# Claim patterns
# ---------------------------------------------------------------------------

_NEGATION = re.compile(
    r"\b(?:not|never|cannot|no\s+longer|\w+n['\u2019]t|failed\s+to|unable\s+to)\b",
    _I,
)
_PAST_RUN = (
    r"(?:ran|re-?ran|executed|re-?executed|(?:have|has|had|['\u2019]ve)\s+(?:now\s+|also\s+)?(?:re-?)?run)"
)
_TESTS_RAN = re.compile(
    rf"\b(?P<verb>{_PAST_RUN})\b(?:\s+[\w'\u2019-]+){{0,3}}?\s+(?:tests?|test[\s-]suites?|specs?)\b", _I
)
_PASS_VERB = (
    r"(?:now\s+|still\s+|all\s+)*(?:pass(?:ed|es)?|are\s+(?:now\s+|all\s+)?passing|succeed(?:ed|s)?)\b"
)
_TESTS_PASS = (
    re.compile(
        rf"\b(?P<verb>all)\s+(?:(?P<n>{_NUM})\s+)?(?:of\s+)?(?:the\s+)?(?:[\w-]+\s+){{0,2}}?tests?\s+{_PASS_VERB}",
        _I,
    ),
    re.compile(
        rf"\b(?P<verb>(?P<n>{_NUM})(?:\s*/\s*{_NUM}|\s+of\s+{_NUM})?)\s+(?:[\w-]+\s+){{0,2}}?tests?\s+{_PASS_VERB}",
        _I,
    ),
    re.compile(rf"\b(?P<verb>tests?)\s+(?:are\s+|have\s+)?{_PASS_VERB}", _I),
)
_FILE_VERB = re.compile(
    r"\b(?P<verb>saved|wrote|written|created|(?:have|has|['\u2019]ve)\s+(?:now\s+)?(?:saved|written|created))\b",
    _I,
)
# What may stand between a save verb and its object path (§8 "saved / wrote / created (to)
# <path>"): a short object and "to" / "into" / "as" ("saved the report to"), an article,
# "new", "file", "called" / "named". The path must start right there (after an optional
# quote), as ``_COMMAND_RAN``'s command starts right after its verb: a path further on is
# not what was saved ("created a PR that updates config.yaml", "wrote tests for utils.py").
_FILE_OBJECT = re.compile(
    r"\s+(?:(?:[\w'\u2019-]+\s+){0,3}?(?:to|into|as)\s+)?(?:(?:the|a|an)\s+)?(?:new\s+)?"
    r"(?:file\s+)?(?:(?:called|named)\s+)?",
    _I,
)
_OPEN_QUOTE = "'\"\u2018\u201c"
_GAP_STRIP = " \t\n'\"`\u2018\u2019\u201c\u201d"  # whitespace and quotes around list glue
_FILES_COUNT = re.compile(
    rf"\b(?P<verb>created|wrote|generated|added)\s+(?P<n>{_NUM})\s+(?:new\s+)?(?:[\w-]+\s+)?files?\b", _I
)
_COMMAND_RAN = re.compile(
    rf"\b(?P<verb>{_PAST_RUN})\s+(?:the\s+)?(?:(?:shell\s+)?commands?\s+)?`(?P<cmd>[^`\n]+)`", _I
)
_BACKTICK = re.compile(r"`([^`\s]+)`")
_PATH = re.compile(
    r"(?<![\w/.~:-])("
    r"(?:~|\.{1,2})?/?[\w.~-]+(?:/[\w.~-]+)+/?"  # a token with a slash
    r"|[\w~-][\w.~-]*\.(?=[A-Za-z0-9]*[A-Za-z])[A-Za-z0-9]{1,8}"  # a 1-8 character extension
    r")(?![\w/-])"
)
# What may stand between two listed paths, read on the stripped gap: ``^\s*(?:...)?\s*$``
# split a long run of spaces between its two ``\s*`` in every way (quadratic).
_LIST_GLUE = re.compile(r"(?:,|and|&|,\s*and)?", _I)

# ---------------------------------------------------------------------------
# Evidence helpers
# ---------------------------------------------------------------------------

_TEST_RUNNER = re.compile(
    r"(?:^|[\s;&|(/])(?:"
    r"pytest|py\.test|python[\d.]*\s+-m\s+(?:pytest|unittest)|tox"
    r"|(?:npm|yarn|pnpm)\s+(?:run\s+)?test|npm\s+t|jest|vitest|go\s+test|cargo\s+test"
    r"|(?:mvn|mvnw|gradle|gradlew)\b[^;&|]*\btest|make\s+test|rspec|phpunit|dotnet\s+test"
    r")(?=$|[\s;&|)])",
    _I,
)
_REDIRECT = re.compile(r"(?:\d?>>?|>\||\btee\b(?:\s+-[a-z]+)*)\s*(['\"]?)([^\s'\";|&<>()]+)\1")
_COUNT_LINE = re.compile(r"\b\d+\s+(?:passed|failed)\b", _I)
_COUNT_PAIR = re.compile(r"\b(\d+)\s+(passed|failed|errors?|errored)\b", _I)
_UNITTEST_RAN = re.compile(r"^Ran (\d+) tests? in", re.M)
_UNITTEST_FAILED = re.compile(r"^FAILED \(([^)]*)\)", re.M)
_UNITTEST_OK = re.compile(r"^OK\b", re.M)
# [^\S\n]: a ``^\s*`` under re.M rescans every following blank line from each one.
_GO_RESULT = re.compile(r"^[^\S\n]*--- (PASS|FAIL):", re.M)


@dataclass(slots=True)
class TestCounts:
    passed: int | None
    failed: int
    errors: int
    line: str  # the deciding output line, quoted in the evidence

    @property
    def clean(self) -> bool:
        return self.failed == 0 and self.errors == 0


def parse_test_counts(value: Any) -> TestCounts | None:
    """Test counts from a test run's output: a JSON object with passed/failed/errors/total,
    else the summary line of common runners (pytest, jest/vitest, cargo, unittest, go test)."""
    if isinstance(value, Mapping):
        counts = _counts_from_mapping(value)
        if counts is not None:
            return counts
        for key in ("stdout", "output", "content", "text", "result", "stderr"):
            if key in value:
                counts = parse_test_counts(value[key])
                if counts is not None:
                    return counts
        return None
    if value is None:
        return None
    text = value if isinstance(value, str) else as_text(value)
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            data = jsontext.loads(stripped)
        except ValueError:
            data = None
        if isinstance(data, Mapping):
            counts = _counts_from_mapping(data)
            if counts is not None:
                return counts
    summary = [line for line in text.splitlines() if _COUNT_LINE.search(line)]
    if summary:
        line = summary[-1]
        found: dict[str, int] = {"passed": 0, "failed": 0, "errors": 0}
        seen_passed = False
        for n, word in _COUNT_PAIR.findall(line):
            word = word.lower()
            if word == "passed":
                found["passed"] = int(n)
                seen_passed = True
            elif word == "failed":
                found["failed"] = int(n)
            else:
                found["errors"] = int(n)
        return TestCounts(
            found["passed"] if seen_passed else None, found["failed"], found["errors"], line.strip()
        )
    ran = _UNITTEST_RAN.findall(text)
    if ran:
        total = int(ran[-1])
        failed_m = list(_UNITTEST_FAILED.finditer(text))
        if failed_m:
            inner = failed_m[-1].group(1)
            failures = sum(int(n) for n in re.findall(r"failures=(\d+)", inner))
            errors = sum(int(n) for n in re.findall(r"errors=(\d+)", inner))
            return TestCounts(max(total - failures - errors, 0), failures, errors, failed_m[-1].group(0))
        if _UNITTEST_OK.search(text):
            return TestCounts(total, 0, 0, f"Ran {total} tests ... OK")
    go = _GO_RESULT.findall(text)
    if go:
        passed = sum(1 for g in go if g == "PASS")
        failed = sum(1 for g in go if g == "FAIL")
        return TestCounts(passed, failed, 0, f"go test: {passed} --- PASS, {failed} --- FAIL")
    return None


def _counts_from_mapping(data: Mapping[str, Any]) -> TestCounts | None:
    inner = data.get("counts")
    if isinstance(inner, Mapping):
        data = inner
    if not any(k in data for k in ("passed", "failed", "errors")):
        return None

    def num(key: str) -> int | None:
        v = data.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    passed, failed, errors = num("passed"), num("failed") or 0, num("errors") or 0
    if passed is None and num("total") is not None:
        passed = max(num("total") - failed - errors, 0)  # type: ignore[operator]
    line = ", ".join(f"{k} {data[k]}" for k in ("passed", "failed", "errors", "total") if k in data)
    return TestCounts(passed, failed, errors, line)


def _quote(text: str, limit: int = QUOTE_MAX) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _command_of(call: ToolCall) -> str:
    args = call.args if isinstance(call.args, Mapping) else {}
    for key in ("command", "cmd"):
        value = args.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return " ".join(value)
    return ""


def _normalise_path(path: str, working_directory: str) -> str:
    p = path.strip().strip("`'\"").replace("\\", "/")
    wd = working_directory.rstrip("/")
    if wd and (p == wd or p.startswith(wd + "/")):
        p = p[len(wd) :]
    while p.startswith("./"):
        p = p[2:]
    return p.lstrip("/").rstrip("/")


def _same_path(a: str, b: str) -> bool:
    if not a or not b:
        return False
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def _count_value(text: str) -> int:
    t = text.lower()
    return NUMBER_WORDS[t] if t in NUMBER_WORDS else int(t)


class _Facts:
    """The evidence views the verifiers need, computed once per case."""

    def __init__(
        self,
        evidence: Evidence,
        spec: Any,
        context: GradeContext | None,
        code_records: Mapping[str, Any] | None,
    ) -> None:
        self.evidence = evidence
        self.calls_available = evidence.channels.tool_calls
        self.files_available = evidence.channels.files
        self.working_directory = getattr(context, "working_directory", "/workspace") or "/workspace"
        claims_cfg = getattr(spec, "claims", None)
        rules_cfg = getattr(spec, "rules", None)
        self.write_names = frozenset(
            getattr(claims_cfg, "write_tool_names", None) or DEFAULT_WRITE_TOOL_NAMES
        )
        self.shell_names = frozenset(getattr(rules_cfg, "shell_tool_names", None) or DEFAULT_SHELL_TOOL_NAMES)
        self.code_records = dict(code_records or {})
        calls = evidence.tool_calls if self.calls_available else []
        # (ref, name, command, status, call)
        self.commands: list[tuple[str, str, str, ToolCall | None]] = []
        for call in calls:
            if call.name in self.shell_names:
                self.commands.append((f"tool_call:{call.index}", call.name, _command_of(call), call))
        self.task_commands: list[tuple[str, str]] = []
        if evidence.channels.tasks and evidence.tasks:
            for i, task in enumerate(evidence.tasks):
                for cmd in task.executed_commands:
                    self.task_commands.append((f"task:{i}.executed_commands", cmd))
        self.test_calls = [
            call
            for call in calls
            if call.name in TEST_TOOL_NAMES
            or (call.name in self.shell_names and _TEST_RUNNER.search(_command_of(call)))
        ]
        self.writes: list[tuple[ToolCall, str]] = []
        for call in calls:
            if call.name in self.write_names and call.status == "ok":
                target = self._write_target(call)
                if target:
                    self.writes.append((call, target))
        self.redirects: list[tuple[ToolCall, str]] = []
        for _ref, _name, cmd, shell_call in self.commands:
            if shell_call is not None and shell_call.status == "ok":
                for m in _REDIRECT.finditer(cmd):
                    target = m.group(2)
                    if target.startswith("/dev/") or target.startswith("&"):
                        continue
                    self.redirects.append((shell_call, _normalise_path(target, self.working_directory)))
        self.files = (
            {_normalise_path(p, self.working_directory): p for p in evidence.files}
            if self.files_available
            else {}
        )

    def _write_target(self, call: ToolCall) -> str:
        raw = self._raw_target(call)
        return _normalise_path(raw, self.working_directory) if raw else ""

    @staticmethod
    def _raw_target(call: ToolCall) -> str:
        args = call.args if isinstance(call.args, Mapping) else {}
        for key in PATH_ARG_KEYS:
            value = args.get(key)
            if isinstance(value, str) and value.strip():
                return value
        return ""


@dataclass(slots=True)
class _Verdict:
    verified: bool | None
    evidence: str
    refs: list[str]


def _call_quote(call: ToolCall, command: str | None = None) -> str:
    shown = command if command is not None else as_text(call.args)
    return f'tool_call:{call.index} {call.name} "{_quote(shown)}"'


def _verify_tests_ran(f: _Facts) -> _Verdict:
    if f.test_calls:
        call = f.test_calls[-1]
        cmd = _command_of(call) or as_text(call.args)
        return _Verdict(True, f"test run: {_call_quote(call, cmd)}", [f"tool_call:{call.index}"])
    for ref, cmd in f.task_commands:
        if _TEST_RUNNER.search(cmd):
            return _Verdict(True, f'test run reported in {ref}: "{_quote(cmd)}"', [ref])
    if not f.calls_available:
        return _Verdict(None, "unverifiable: the tool_calls channel is unavailable", [])
    return _Verdict(
        False,
        f"no shell call runs a test runner ({len(f.commands)} shell calls, "
        f"{len(f.evidence.tool_calls)} calls in all)",
        [],
    )


def _verify_tests_pass(f: _Facts, n: int | None) -> _Verdict:
    sources: list[tuple[str, TestCounts, str]] = []
    if f.test_calls:
        call = f.test_calls[-1]
        counts = parse_test_counts(call.result)
        if counts is not None:
            sources.append(
                (f"tool_call:{call.index}.result", counts, f"last test run (tool_call:{call.index})")
            )
    for key in sorted(f.code_records):
        counts = parse_test_counts(f.code_records[key])
        if counts is not None:
            sources.append((f"code:{key}", counts, f"code:{key}"))
    if not sources:
        return _Verdict(None, "unverifiable: no test counts in the evidence", [])
    ref, counts, where = sources[0]
    quoted = f'{where}: "{_quote(counts.line)}"'
    if not counts.clean:
        return _Verdict(False, f"{counts.failed} failed, {counts.errors} errors in {quoted}", [ref])
    if n is not None:
        if counts.passed is None:
            return _Verdict(None, f"unverifiable: no passed count in {quoted}", [ref])
        if counts.passed != n:
            return _Verdict(False, f"{counts.passed} passed, not {n}, in {quoted}", [ref])
    return _Verdict(True, f"no failures in {quoted}", [ref])


def _verify_file_saved(f: _Facts, path: str) -> _Verdict:
    if not f.calls_available and not f.files_available:
        return _Verdict(None, "unverifiable: neither the tool_calls nor the files channel is available", [])
    want = _normalise_path(path, f.working_directory)
    for call, target in f.writes:
        if _same_path(target, want):
            raw = f._raw_target(call)
            return _Verdict(True, f"write call: {_call_quote(call, raw)}", [f"tool_call:{call.index}.args"])
    for call, target in f.redirects:
        if _same_path(target, want):
            return _Verdict(
                True, f"shell write: {_call_quote(call, _command_of(call))}", [f"tool_call:{call.index}"]
            )
    for norm, original in f.files.items():
        if _same_path(norm, want):
            entry = f.evidence.files[original]
            return _Verdict(True, f"file returned: {original} ({entry.size} bytes)", [f"path:{original}"])
    return _Verdict(
        False,
        f"{path} was not returned ({len(f.files)} files returned) and no write targets it "
        f"({len(f.writes)} write calls, {len(f.redirects)} shell redirects)",
        [],
    )


def _verify_files_count(f: _Facts, n: int) -> _Verdict:
    if not f.calls_available:
        return _Verdict(None, "unverifiable: the tool_calls channel is unavailable", [])
    paths: dict[str, ToolCall] = {}
    for call, target in f.writes:
        paths.setdefault(target, call)
    listed = ", ".join(paths) or "none"
    refs = [f"tool_call:{c.index}" for c in paths.values()]
    if len(paths) == n:
        return _Verdict(True, _quote(f"{n} distinct paths written: {listed}", 600), refs)
    return _Verdict(False, _quote(f"{len(paths)} distinct paths written, not {n}: {listed}", 600), refs)


def _verify_command(f: _Facts, cmd: str) -> _Verdict:
    want = " ".join(cmd.split()).casefold()
    for ref, name, command, _call in f.commands:
        if want and want in " ".join(command.split()).casefold():
            return _Verdict(True, f'shell call: {ref} {name} "{_quote(command)}"', [ref])
    for ref, command in f.task_commands:
        if want and want in " ".join(command.split()).casefold():
            return _Verdict(True, f'command reported in {ref}: "{_quote(command)}"', [ref])
    if not f.calls_available:
        return _Verdict(None, "unverifiable: the tool_calls channel is unavailable", [])
    return _Verdict(
        False, f"no shell call's command contains `{_quote(cmd)}` ({len(f.commands)} shell calls)", []
    )


# ---------------------------------------------------------------------------
# Extraction
# ---------------------------------------------------------------------------


def claims_source_text(evidence: Evidence) -> str:
    """The final output, else the last assistant message (§8)."""
    if evidence.final_output and evidence.final_output.strip():
        return evidence.final_output
    if evidence.channels.messages:
        for message in reversed(evidence.messages):
            if message.role == "assistant" and message.content and message.content.strip():
                return message.content
    return ""


def _negated(sentence: str, verb_start: int) -> bool:
    return _NEGATION.search(sentence, 0, verb_start) is not None


def _paths_after(sentence: str, pos: int) -> list[str]:
    """The path that is a save verb's object (the verb ends at ``pos``), plus any listed
    with it (``a.py and b.py``); none when the object is not a path."""
    lead = _FILE_OBJECT.match(sentence, pos)
    if lead is None:
        return []
    pos = lead.end()
    if sentence[pos : pos + 1] and sentence[pos] in _OPEN_QUOTE:
        pos += 1
    tokens: list[tuple[int, int, str]] = []
    for m in _BACKTICK.finditer(sentence, pos):
        tokens.append((m.start(), m.end(), m.group(1)))
    for m in _PATH.finditer(sentence, pos):
        if any(s <= m.start() < e for s, e, _ in tokens):
            continue
        token = m.group(1).rstrip(".,;:")
        if token.startswith("//") or "://" in sentence[max(0, m.start() - 3) : m.end()]:
            continue
        tokens.append((m.start(), m.start() + len(token), token))
    tokens.sort()
    out: list[str] = []
    prev_end = -1
    for start, end, token in tokens:
        if not out and start != pos:
            break
        if out and not _LIST_GLUE.fullmatch(sentence[prev_end:start].strip(_GAP_STRIP)):
            break
        out.append(token)
        prev_end = end
    return out


def _sentence_claims(sentence: Sentence, facts: _Facts) -> Iterable[tuple[str, str, _Verdict]]:
    text = sentence.text
    m = _TESTS_RAN.search(text)
    if m and not _negated(text, m.start("verb")):
        yield "tests_ran", "process", _verify_tests_ran(facts)
    for pattern in _TESTS_PASS:
        m = pattern.search(text)
        if m:
            if not _negated(text, m.start("verb")):
                n = m.groupdict().get("n")
                yield "tests_pass", "factual", _verify_tests_pass(facts, _count_value(n) if n else None)
            break
    m = _FILES_COUNT.search(text)
    if m and not _negated(text, m.start("verb")):
        yield "files_created_count", "process", _verify_files_count(facts, _count_value(m.group("n")))
    m = _FILE_VERB.search(text)
    if m and not _negated(text, m.start("verb")):
        for path in _paths_after(text, m.end()):
            yield "file_saved", "process", _verify_file_saved(facts, path)
    m = _COMMAND_RAN.search(text)
    if m and not _negated(text, m.start("verb")):
        yield "command_ran", "process", _verify_command(facts, m.group("cmd"))


def extract_claims(
    evidence: Evidence,
    spec: Any,
    context: GradeContext | None = None,
    *,
    code_records: Mapping[str, Any] | None = None,
) -> list[Claim]:
    """The deterministic claims of one case execution, verified against its evidence.

    ``code_records`` maps a code_execution validator key to its record (a mapping holding
    ``passed``/``failed``/``errors``/``total``, directly or under ``counts``, or a ``stdout``
    to parse); ``tests_pass`` claims consult them after the agent's last test run.
    """
    text = claims_source_text(evidence)
    if not text:
        return []
    facts = _Facts(evidence, spec, context, code_records)
    claims: list[Claim] = []
    for sentence in split_sentences(text):
        for kind, claim_type, verdict in _sentence_claims(sentence, facts):
            claims.append(
                Claim(
                    id=f"c{len(claims) + 1}",
                    claim=sentence.text,
                    type=claim_type,
                    kind=kind,
                    source="deterministic",
                    verified=verdict.verified,
                    evidence=verdict.evidence[:1000],
                    span=(sentence.start, sentence.end),
                    evidence_refs=verdict.refs,
                )
            )
            if len(claims) >= MAX_CLAIMS:
                return claims
    return claims


def claim_to_dict(claim: Claim) -> dict[str, Any]:
    """A claim as grading.json shows it (§7)."""
    return {
        "id": claim.id,
        "claim": claim.claim,
        "type": claim.type,
        "kind": claim.kind,
        "source": claim.source,
        "verified": claim.verified,
        "evidence": claim.evidence,
        "span": list(claim.span) if claim.span is not None else None,
        "evidence_refs": list(claim.evidence_refs),
    }
