"""``manage.py grade PACK --results FILE ...``: offline grading (spec/interfaces.md §5).

Validates the pack (invalid: exit 2, the validate body under ``--json``), selects the
input set (pack-format §13; selection errors exit 2), reads the JSONL results (every bad
line listed, exit 2), grades each case with the engine and prints the document (``--json``)
or the readable table. Exit 0 when no case is FAILED and at least one PASSED, else 1.
Touches no database.

Judge providers: ``--judge-provider openai|anthropic`` (or ``AGENTCLASH_JUDGE_PROVIDER``)
selects the client for every judge of the pack, with ``--judge-base-url`` /
``AGENTCLASH_JUDGE_BASE_URL`` (default: the provider's public API) and ``--judge-api-key`` /
``AGENTCLASH_JUDGE_API_KEY``. The operator is trusted, so the base URL may be loopback or
private. With a provider, judges, n_wise rankings, model claims and the model critique run
(``grading.judges.offline``) and the document gains ``judge_usage``; without one, judge
expectations are NOT_EVALUATED, reason ``no_judge_provider``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from agentclash_site.lib.cli import CliError, JsonCommand, dumps, printable_text, refuse_empty_output
from grading.engine.offline import grade_offline, offline_exit_code, render_text
from grading.engine.reader import InvalidResults
from packs.bundle import SelectionError, select_input_set, validate_bundle
from packs.management.commands.pack import read_bundle_or_fail, report_text

EXIT_INVALID_INPUT = 2
JUDGE_PROVIDERS = ("openai", "anthropic")


class Command(JsonCommand):
    help = "Grade recorded agent results (JSONL) against a challenge pack, offline."
    requires_system_checks: list[str] = []
    path_options = frozenset({"pack", "results", "output"})

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("pack", help="a pack YAML, zip bundle or pack directory")
        parser.add_argument("--results", required=True, help="JSONL: one agent response per case execution")
        parser.add_argument("--input-set", dest="input_set", help="input set key or exact name")
        parser.add_argument("--output", help="write the JSON document to this file, print the table")
        parser.add_argument(
            "--judge-provider",
            dest="judge_provider",
            choices=JUDGE_PROVIDERS,
            help="the client for every judge of the pack (default: AGENTCLASH_JUDGE_PROVIDER; without one,"
            " judges are NOT_EVALUATED)",
        )
        parser.add_argument(
            "--judge-base-url",
            dest="judge_base_url",
            help="the provider's API base URL, may be private (default: AGENTCLASH_JUDGE_BASE_URL, else the"
            " provider's public API)",
        )
        parser.add_argument("--judge-api-key", dest="judge_api_key", help="default: AGENTCLASH_JUDGE_API_KEY")
        self.add_json_argument(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        refuse_empty_output(options)
        provider = _judge_provider(options)
        pack_path = Path(options["pack"])
        report = validate_bundle(read_bundle_or_fail(pack_path, field="pack"), filename=pack_path.name)
        if not report.valid:
            if not self._as_json:
                self.stderr.write(report_text(report))
            raise CliError("invalid_challenge_pack", "the pack is invalid", document=report.to_body())
        assert report.manifest is not None and report.bundle is not None
        try:
            selection = select_input_set(report.manifest, options.get("input_set"))
        except SelectionError as exc:
            raise CliError(exc.code, exc.message, field="input_set", choices=exc.choices) from exc
        results = _read_results(Path(options["results"]))
        arguments = {
            "spec": report.evaluation_spec,
            "pack_slug": report.bundle.pack.slug,
            "pack_number": report.bundle.version.number,
            "input_set_name": selection.key,
            "cases": report.grading_cases(selection.key),
            "results": results,
        }
        try:
            if provider is None:
                document = self._grade_streamed(arguments, options)
            else:
                from grading.judges.offline import grade_offline_with_judges

                document = grade_offline_with_judges(provider=provider, **arguments)
                if options.get("output"):
                    _write(Path(options["output"]), dumps(document) + "\n")
                self.emit(document, render_text(document))
        except InvalidResults as exc:
            body = exc.to_dict()
            if not self._as_json:
                lines = [f"  line {bad['line']}: {bad['message']}" for bad in body["error"].get("lines", [])]
                self.stderr.write(printable_text("\n".join([body["error"]["message"] + ":", *lines])))
            raise CliError("invalid_results", body["error"]["message"], document=body) from exc
        code = offline_exit_code(document)
        if code:
            self.stdout.flush()
            sys.exit(code)

    def _grade_streamed(self, arguments: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
        """Grade without judges, writing the ``--json`` document (to ``--output`` or stdout)
        case by case as it is graded, never whole in memory; the same text as ``dumps`` of the
        whole document. Nothing is written before the results are read valid. Returns the
        document with, in ``cases``, only what the readable table and the exit code read."""
        sink: Any = None  # opened at the first case: an invalid file writes nothing
        target = Path(options["output"]) if options.get("output") else None
        slim: list[dict[str, Any]] = []
        writer = _DocumentWriter()

        def open_sink() -> Any:
            nonlocal sink
            if sink is None:
                sinks: list[Any] = []
                if target is not None:
                    try:
                        sinks.append(target.open("w", encoding="utf-8"))
                    except OSError as exc:
                        raise CliError(
                            "io_error", f"cannot write {target}: {exc.strerror or exc}", field="output"
                        ) from exc
                if self._as_json:  # --json prints the document, --output or not (as emit does)
                    sinks.append(_Unended(self.stdout))
                sink = _Tee(sinks)
                sink.write(
                    writer.head(arguments["pack_slug"], arguments["pack_number"], arguments["input_set_name"])
                )
            return sink

        def on_case(entry: dict[str, Any]) -> None:
            open_sink().write(writer.case(entry))
            grading = entry["grading"]
            slim.append(
                {
                    **{k: entry[k] for k in ("deployment", "challenge_key", "case_key", "repetition")},
                    "grading": {
                        "status": grading.get("status"),
                        "reason_code": grading.get("reason_code"),
                        "scorecard": {"overall_score": (grading.get("scorecard") or {}).get("overall_score")},
                    },
                }
            )

        try:
            document = grade_offline(**arguments, judge=None, on_case=on_case)
            open_sink().write(writer.tail(document["lanes"], document["eval_feedback"]) + "\n")
        finally:
            if sink is not None:
                sink.close()
        document["cases"] = slim
        if not self._as_json:
            self.stdout.write(printable_text(render_text(document)))
        return document


class _DocumentWriter:
    """The offline document in parts, each as ``dumps`` writes it inside the whole (two-space
    indent; a case entry sits four spaces in): head, the cases one by one, tail."""

    def __init__(self) -> None:
        self.cases = 0

    def head(self, slug: str, number: int, input_set: str | None) -> str:
        text = dumps({"pack": {"slug": slug, "number": number}, "input_set": input_set})
        return text[: -len("\n}")] + ',\n  "cases": ['

    def case(self, entry: dict[str, Any]) -> str:
        self.cases += 1
        return ("," if self.cases > 1 else "") + "\n    " + dumps(entry).replace("\n", "\n    ")

    def tail(self, lanes: list[Any], eval_feedback: Any) -> str:
        text = dumps({"lanes": lanes, "eval_feedback": eval_feedback})
        return ("\n  ]" if self.cases else "]") + ",\n" + text[len("{\n") :]


class _Unended:
    """Django's stdout wrapper writing each part as it is (no newline added after it)."""

    def __init__(self, out: Any) -> None:
        self.out = out

    def write(self, text: str) -> None:
        self.out.write(text, ending="")

    def close(self) -> None:
        pass


class _Tee:
    def __init__(self, sinks: list[Any]) -> None:
        self.sinks = sinks

    def write(self, text: str) -> None:
        for sink in self.sinks:
            sink.write(text)

    def close(self) -> None:
        for sink in self.sinks:
            sink.close()


def _judge_provider(options: dict[str, Any]) -> Any:
    """The provider of ``--judge-*`` (flags win over ``AGENTCLASH_JUDGE_*``), or None."""
    provider = options.get("judge_provider") or os.environ.get("AGENTCLASH_JUDGE_PROVIDER", "").strip()
    if not provider:
        given = [flag for flag in ("judge_base_url", "judge_api_key") if options.get(flag)]
        if given:
            # a forgotten provider graded every judge NOT_EVALUATED, the flag silently unused
            flags = " and ".join("--" + flag.replace("_", "-") for flag in given)
            raise CliError(
                "missing_judge_provider",
                f"{flags} {'need' if len(given) > 1 else 'needs'} a judge provider: add --judge-provider "
                f"{'|'.join(JUDGE_PROVIDERS)} (or set AGENTCLASH_JUDGE_PROVIDER), or drop {flags}",
                field="judge_provider",
            )
        return None
    if provider not in JUDGE_PROVIDERS:
        raise CliError(
            "invalid_judge_provider",
            f"judge provider must be one of {', '.join(JUDGE_PROVIDERS)} (got {provider!r}); "
            "fix --judge-provider or AGENTCLASH_JUDGE_PROVIDER",
            field="judge_provider",
        )
    base_url = (options.get("judge_base_url") or os.environ.get("AGENTCLASH_JUDGE_BASE_URL", "")).strip()
    api_key = options.get("judge_api_key") or os.environ.get("AGENTCLASH_JUDGE_API_KEY", "")
    if base_url and not base_url.startswith(("http://", "https://")):
        raise CliError(
            "invalid_judge_base_url",
            f"judge base URL must be an absolute http(s) URL (got {base_url!r}); fix --judge-base-url "
            "or AGENTCLASH_JUDGE_BASE_URL",
            field="judge_base_url",
        )
    from grading.judges.providers import ProviderConfig

    # The CLI operator is trusted: a loopback or private base URL is allowed (interfaces.md §5).
    return ProviderConfig(
        kind=provider,
        base_url=base_url,
        api_key=api_key.strip(),
        allow_private=True,
        settings_where=(
            "the grade command's --judge-api-key / --judge-base-url flags "
            "(or AGENTCLASH_JUDGE_API_KEY / AGENTCLASH_JUDGE_BASE_URL)"
        ),
    )


# The trace import's upload limit (runs.services.trace_import.MAX_RESULTS_BYTES).
RESULTS_MAX_BYTES = 64 * 1024 * 1024


def _read_results(path: Path) -> bytes:
    """The results file, read with the upload limit and only when it is a regular file (a
    device such as /dev/zero was read until memory ran out, a FIFO waited for a writer)."""
    from packs.bundle.archive import NotABundle, read_regular_file

    try:
        data = read_regular_file(path, RESULTS_MAX_BYTES, expected="RESULTS must be a JSONL file")
    except NotABundle as exc:
        raise CliError("io_error", str(exc), field="results") from exc
    except OSError as exc:
        raise CliError("io_error", f"cannot read {path}: {exc.strerror or exc}", field="results") from exc
    if len(data) > RESULTS_MAX_BYTES:
        raise CliError(
            "payload_too_large",
            f"{path} is larger than 64 MiB; results are limited to 64 MiB, as an upload is: split the file",
            field="results",
        )
    from grading.engine.reader import ResultsTooLarge, gunzipped

    try:  # a .jsonl.gz is read as the upload route reads it
        return gunzipped(data, RESULTS_MAX_BYTES)
    except ResultsTooLarge:
        raise CliError(
            "payload_too_large",
            f"{path} decompresses to more than 64 MiB; results are limited to 64 MiB, as an upload is: "
            "split the file",
            field="results",
        ) from None
    except ValueError as exc:
        raise CliError("parse_error", f"{path} is gzip but cannot be read: {exc}", field="results") from None


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise CliError("io_error", f"cannot write {path}: {exc.strerror or exc}", field="output") from exc
