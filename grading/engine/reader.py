"""The results reader of the offline ``grade`` command and trace imports (interfaces.md §5).

Input: JSONL bytes, one line per case execution in the agent-protocol response shape plus
``case_key`` (required), ``challenge_key`` (optional; must match when given), ``deployment``
(default ``"default"``) and ``repetition`` (default 1). Keys match exactly after trimming.

Every bad line is collected, and one :class:`InvalidResults` lists them all
(``invalid_results``, "N bad result lines"). Good input gives the executions grouped by
deployment in order of first appearance, each with its ``Evidence``.
"""

from __future__ import annotations

import json
import re
import unicodedata
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import jsontext
from .types import CaseDef, Evidence, GradeContext

DEFAULT_DEPLOYMENT = "default"
# A result line's repetition number: above it a line is refused (a number beyond 64 bits
# could not even be written into the grading.json).
MAX_REPETITION = 1_000_000

EvidenceBuilder = Callable[..., Evidence]


class InvalidResults(ValueError):
    """Bad result lines; ``lines`` is ``[{"line": n, "message": "...", "field"?: "..."}]``
    (1-based; ``field`` names the line's first field at fault, when a field is)."""

    code = "invalid_results"

    def __init__(self, lines: list[dict[str, Any]]) -> None:
        self.lines = lines
        self.message = f"{len(lines)} bad result lines"
        super().__init__(self.message)

    def to_dict(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, "lines": list(self.lines)}}


GZIP_MAGIC = b"\x1f\x8b"


class ResultsTooLarge(ValueError):
    """Gzipped results that decompress past the limit."""


def gunzipped(data: bytes, limit: int) -> bytes:
    """``data`` itself, or its decompressed bytes when it is gzip (no JSONL or UTF-8 text
    starts with 0x1f 0x8b; concatenated members are read in turn). :class:`ResultsTooLarge`
    as soon as the output passes ``limit`` bytes (never more is inflated), ``ValueError``
    when the gzip is broken or cut short."""
    if not data.startswith(GZIP_MAGIC):
        return data
    out = bytearray()
    rest = data
    while rest:
        inflater = zlib.decompressobj(wbits=31)
        try:
            out += inflater.decompress(rest, limit + 1 - len(out))
        except zlib.error as exc:
            raise ValueError(f"the gzip data is broken ({exc})") from None
        if len(out) > limit:
            raise ResultsTooLarge(f"the results are larger than {limit:,} bytes decompressed")
        if not inflater.eof:
            raise ValueError("the gzip data is cut short")
        rest = inflater.unused_data
        if not rest.strip(b"\0"):  # trailing padding after the last member
            break
    return bytes(out)


@dataclass(slots=True)
class Execution:
    deployment: str
    case: CaseDef
    repetition: int
    line: int
    evidence: Evidence | None  # None when read with keep_evidence=False: see evidence_of
    response: dict[str, Any] = field(default_factory=dict)
    raw: bytes = b""  # the line, when its evidence was not kept

    @property
    def challenge_key(self) -> str:
        return self.case.challenge_key

    @property
    def case_key(self) -> str:
        return self.case.case_key


@dataclass(slots=True)
class ResultSet:
    deployments: list[str]  # in order of first appearance
    executions: list[Execution]  # grouped by deployment, then input-set order, then repetition

    def for_deployment(self, deployment: str) -> list[Execution]:
        return [e for e in self.executions if e.deployment == deployment]


def _default_builder() -> EvidenceBuilder:
    from .evidence import evidence_from_response

    return evidence_from_response


def _protocol_errors() -> tuple[type[Exception], ...]:
    try:
        from .evidence import ProtocolError
    except ImportError:  # pragma: no cover - evidence.py always ships with the engine
        return (ValueError,)
    return (ProtocolError,)


def _shown(value: Any, limit: int = 60) -> str:
    """A value as JSON for a message, cut to ``limit`` characters."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        text = type(value).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _quoted(key: str) -> str:
    """A key as ``repr`` shows it, cut to 60 characters (a bad line's message does not echo
    a megabyte of key back)."""
    return repr(key) if len(key) <= 60 else repr(key[:59]) + "…"


# A protocol error's message starts with the field it is about (``messages[0].role must ...``).
_PROTOCOL_FIELD = re.compile(r"([a-z_]+(?:\[[^\]]*\]|\.[a-z_]+)*) (?:must|is) ")

Problems = list[tuple[str | None, str]]  # (field at fault or None, message)


def _protocol_field(message: str) -> str | None:
    match = _PROTOCOL_FIELD.match(message)
    return match.group(1) if match else None


def _folded(key: str) -> str:
    """A key for a hint only (matching is exact): NFC, then case-folded."""
    return unicodedata.normalize("NFC", key).casefold()


def _bad_line(number: int, problems: Problems) -> dict[str, Any]:
    bad: dict[str, Any] = {"line": number, "message": "; ".join(m for _, m in problems)}
    field_name = next((f for f, _ in problems if f is not None), None)
    if field_name is not None:
        bad["field"] = field_name
    return bad


def _key(value: Any, name: str, problems: Problems, *, required: bool) -> str | None:
    if value is None:
        if required:
            problems.append((name, f"{name} is required"))
        return None
    if not isinstance(value, str) or not value.strip():
        problems.append((name, f"{name} must be a non-empty string"))
        return None
    return value.strip()


class ResultsReader:
    """Reads result lines one at a time against one input set, indexed once (a trace import
    reads each uploaded line with one reader: a fresh index per line made an upload of N
    lines to an N-case run cost N²). ``duplicates``: report a second line for the same
    deployment, case and repetition (the trace import checks that per lane itself)."""

    def __init__(
        self,
        cases: Sequence[CaseDef],
        *,
        contexts: Mapping[tuple[str, str], GradeContext] | None = None,
        build_evidence: EvidenceBuilder | None = None,
        duplicates: bool = True,
        keep_evidence: bool = True,
    ) -> None:
        self._keep = keep_evidence
        self._build = build_evidence or _default_builder()
        self._protocol_errors = _protocol_errors()
        self._contexts = contexts or {}
        self._by_key: dict[str, list[CaseDef]] = {}
        self.order: dict[tuple[str, str], int] = {}
        self._near: dict[str, str] = {}  # folded key -> the key, for "did you mean"
        for i, known in enumerate(cases):
            key = known.case_key.strip()
            self._by_key.setdefault(key, []).append(known)
            self._near.setdefault(_folded(key), key)
            self.order.setdefault((known.challenge_key, known.case_key), i)
        self._seen: dict[tuple[str, str, str, int], int] | None = {} if duplicates else None

    def read_line(self, number: int, raw: bytes) -> Execution | dict[str, Any] | None:
        """The line's execution, its bad-line report (``{"line", "message", "field"?}``), or
        None for a blank line. A UTF-8 BOM and a final CR are ignored."""
        if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        raw = raw.rstrip(b"\r")
        if not raw.strip():
            return None
        problems: Problems = []
        try:
            obj = jsontext.loads(raw.decode("utf-8"))
        except UnicodeDecodeError:
            return {"line": number, "message": "not UTF-8 text"}
        except ValueError as exc:
            return {"line": number, "message": f"not JSON: {exc}"}
        if not isinstance(obj, dict):
            return {"line": number, "message": "not a JSON object"}
        case_key = _key(obj.get("case_key"), "case_key", problems, required=True)
        challenge_key = _key(obj.get("challenge_key"), "challenge_key", problems, required=False)
        deployment = _key(obj.get("deployment", DEFAULT_DEPLOYMENT), "deployment", problems, required=True)
        repetition = obj.get("repetition", 1)
        if isinstance(repetition, bool) or not isinstance(repetition, int) or repetition < 1:
            problems.append(
                ("repetition", f"repetition must be a positive integer, got {_shown(repetition)}")
            )
        elif repetition > MAX_REPETITION:
            problems.append(
                ("repetition", f"repetition must be at most {MAX_REPETITION:,}, got {_shown(repetition)}")
            )
        if "final_output" not in obj:
            problems.append(("final_output", "final_output is required"))
        if obj.get("invocations") is not None and obj.get("tool_calls"):
            problems.append(
                (
                    "tool_calls",
                    "both invocations and a non-empty tool_calls: group the calls in invocations only",
                )
            )
        case: CaseDef | None = None
        if case_key is not None:
            candidates: list[CaseDef] | None = self._by_key.get(case_key, [])
            if challenge_key is not None and candidates:
                matching = [c for c in candidates if c.challenge_key.strip() == challenge_key]
                if not matching:
                    problems.append(
                        (
                            "challenge_key",
                            f"challenge_key {_quoted(challenge_key)} does not match case "
                            f"{_quoted(case_key)} (challenge {candidates[0].challenge_key!r})",
                        )
                    )
                candidates = matching or None
            if candidates is None:
                pass
            elif not candidates:
                message = f"case {_quoted(case_key)} is not in the input set"
                if _folded(case_key) in self._near:
                    message += (
                        f" (keys match exactly: did you mean {_quoted(self._near[_folded(case_key)])}?)"
                    )
                problems.append(("case_key", message))
            elif len(candidates) > 1:
                names = ", ".join(sorted(c.challenge_key for c in candidates))
                problems.append(
                    (
                        "challenge_key",
                        f"case {_quoted(case_key)} is ambiguous: give challenge_key (one of {names})",
                    )
                )
            else:
                case = candidates[0]
        if case is not None and deployment is not None and isinstance(repetition, int):
            ident = (deployment, case.challenge_key, case.case_key, repetition)
            if self._seen is not None and ident in self._seen:
                problems.append(
                    (
                        "case_key",
                        f"duplicate result for deployment {_quoted(deployment)}, case "
                        f"{case.case_key!r}, repetition {repetition} (first on line {self._seen[ident]})",
                    )
                )
            elif self._seen is not None:
                self._seen[ident] = number
        evidence = None
        if not problems and case is not None and deployment is not None:
            ctx = self._contexts.get((case.challenge_key, case.case_key))
            try:
                evidence = self._build(obj, **_evidence_options(ctx))
            except self._protocol_errors as exc:
                problems.append((_protocol_field(str(exc)), str(exc)))
        if problems:
            return _bad_line(number, problems)
        assert case is not None and deployment is not None and evidence is not None
        if not self._keep:  # checked; built again from the line when it is graded
            return Execution(deployment, case, int(repetition), number, None, raw=raw)
        return Execution(deployment, case, int(repetition), number, evidence, obj)


def iter_lines(data: bytes) -> Iterator[tuple[int, bytes]]:
    """(1-based number, bytes) of each line of ``data``, without copying it into a list."""
    start = 0
    number = 0
    size = len(data)
    while start < size:
        end = data.find(b"\n", start)
        if end < 0:
            end = size
        number += 1
        yield number, data[start:end]
        start = end + 1


def read_results(
    data: bytes | str,
    cases: Sequence[CaseDef],
    *,
    contexts: Mapping[tuple[str, str], GradeContext] | None = None,
    build_evidence: EvidenceBuilder | None = None,
    keep_evidence: bool = True,
) -> ResultSet:
    """Parse and check every line; raise :class:`InvalidResults` listing all bad lines.

    ``contexts`` (by ``(challenge_key, case_key)``) supply the rendered instructions, tool
    policy, working directory and evidence level each case's evidence is built with.
    ``keep_evidence=False``: each execution keeps its line (``raw``), not its evidence and
    response (about 3x the line), and :func:`evidence_of` builds them again one at a time.
    """
    reader = ResultsReader(
        cases, contexts=contexts, build_evidence=build_evidence, keep_evidence=keep_evidence
    )
    if isinstance(data, str):
        data = data.encode()
    bad: list[dict[str, Any]] = []
    deployments: list[str] = []
    executions: list[Execution] = []
    for number, raw in iter_lines(data):
        read = reader.read_line(number, raw)
        if read is None:
            continue
        if isinstance(read, dict):
            bad.append(read)
            continue
        if read.deployment not in deployments:
            deployments.append(read.deployment)
        executions.append(read)
    if bad:
        raise InvalidResults(bad)
    rank = {d: i for i, d in enumerate(deployments)}
    order = reader.order
    executions.sort(
        key=lambda e: (rank[e.deployment], order[(e.case.challenge_key, e.case.case_key)], e.repetition)
    )
    return ResultSet(deployments=deployments, executions=executions)


def evidence_of(
    execution: Execution, contexts: Mapping[tuple[str, str], GradeContext] | None = None
) -> Evidence:
    """The execution's evidence, built again from its line when it was not kept (the line was
    read valid, so this cannot fail)."""
    if execution.evidence is not None:
        return execution.evidence
    obj = jsontext.loads(execution.raw.decode("utf-8"))
    ctx = (contexts or {}).get((execution.challenge_key, execution.case_key))
    return _default_builder()(obj, **_evidence_options(ctx))


def _evidence_options(ctx: GradeContext | None) -> dict[str, Any]:
    options: dict[str, Any] = {"deployment_kind": "trace_import"}
    if ctx is not None:
        options.update(
            evidence_level=ctx.evidence_level or "structured",
            rendered_instructions=ctx.rendered_instructions,
            tool_policy=dict(ctx.tool_policy),
            working_directory=ctx.working_directory,
        )
    return options
