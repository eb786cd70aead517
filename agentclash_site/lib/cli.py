"""Shared plumbing for management commands with ``--json`` (spec/interfaces.md §2).

- stdout carries exactly one JSON document under ``--json``; logs and progress go to stderr.
- Errors print ``{"error": {"code", "message", "field"?, "choices"?}}`` and exit with the
  command's own code for that error, else 2. Usage errors (argparse) exit 2 too, and so does
  a database that ``migrate`` has not set up (``database_not_ready``), and an unexpected
  exception (``internal_error``, its traceback on stderr): exit 1 is a verdict for several
  commands (pack invalid, a case FAILED, a pass rate below ``--fail-under``), never a crash.
- A reader of stdout that goes away (``run export RUN --format jsonl | head``) ends the
  command quietly with exit 141 (128 + SIGPIPE, what a shell reports for ``cat`` there),
  not a BrokenPipeError traceback.
- Ctrl-C (KeyboardInterrupt) is one ``interrupted`` line on stderr, exit 2, not a traceback;
  under ``--json`` the ``interrupted`` error object too, unless part of a document is on
  stdout already (a streamed ``grade --json``): a second document would follow it, so the
  stderr line says the one on stdout is incomplete. ``eval start`` names its queued run in
  its own ``interrupted`` error (exit 3).
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import re
import sys
import traceback
from typing import Any

import orjson
from django.core.management.base import BaseCommand, CommandParser, OutputWrapper
from django.db import OperationalError, ProgrammingError

from agentclash_site.lib import broker
from agentclash_site.lib.db import not_migrated_message


class CliError(Exception):
    """A failure with a stable code; ``exit_code`` defaults to 2 (usage / invalid input)."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        exit_code: int = 2,
        field: str | None = None,
        choices: list[Any] | None = None,
        document: dict[str, Any] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.exit_code = exit_code
        self.field = field
        self.choices = choices
        self.document = document  # printed instead of the error object (e.g. a validate body)
        self.extra = extra or {}

    def as_json(self) -> dict[str, Any]:
        if self.document is not None:
            return self.document
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.field is not None:
            error["field"] = self.field
        if self.choices is not None:
            error["choices"] = self.choices
        error.update(self.extra)
        return {"error": error}


def refuse_empty_output(options: dict[str, Any], name: str = "output") -> None:
    """A usage error for a file option given empty (``--output "$OUT"`` with OUT unset):
    taken as left out, the command printed to stdout, exit 0, and the file a CI job then
    reads was never written."""
    value = options.get(name)
    if value is not None and not str(value).strip():
        flag = "--" + name.replace("_", "-")
        raise CliError(
            "usage", f"{flag} is empty: give a file path, or leave {flag} out to print to stdout", field=name
        )


_REQUIRED = "the following arguments are required: "  # argparse's text for missing ones


class _JsonAwareParser(CommandParser):
    _argument_error: argparse.ArgumentError | None = None

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:  # type: ignore[override]
        # argparse turns an ArgumentError (a bad value of one option) into error(text), and
        # the option is lost: it is kept here, so the usage error can name it (``field``) and
        # list what it takes (``choices``).
        exit_on_error, self.exit_on_error = self.exit_on_error, False
        try:
            return super().parse_known_args(args, namespace)
        except argparse.ArgumentError as err:
            self._argument_error = err
            self.error(str(err))
        finally:
            self.exit_on_error = exit_on_error

    def _usage_error(self, message: str) -> dict[str, Any]:
        error: dict[str, Any] = {"code": "usage", "message": message}
        err, self._argument_error = self._argument_error, None
        name = err.argument_name if err is not None else None
        if name is None and message.startswith(_REQUIRED):
            name = message[len(_REQUIRED) :].split(", ")[0]  # the first one missing
        action = None
        if name:
            action = self._option_string_actions.get(name.split("/")[0]) or next(
                (a for a in self._actions if not a.option_strings and name in (a.metavar, a.dest)), None
            )
        if action is not None:
            error["field"] = action.dest
            # What the option takes is the fix both for a value it does not take and for the
            # option left out (``--kind``, ``--format``, a subcommand).
            if action.choices is not None and ("invalid choice" in message or message.startswith(_REQUIRED)):
                error["choices"] = [str(choice) for choice in action.choices]
        return error

    def error(self, message: str) -> None:  # type: ignore[override]
        if self.called_from_command_line and "--json" in sys.argv:
            sys.stdout.write(json.dumps({"error": self._usage_error(message)}) + "\n")
            sys.stderr.write(f"{self.prog}: error: {message}\n")
            sys.exit(2)
        super().error(message)


def _make_json_aware(parser: argparse.ArgumentParser) -> None:
    """Swap in the JSON-aware ``error`` on the parser and every subparser, and turn off
    argparse's prefix matching: ``--jso`` was taken for ``--json`` (yet its errors came out
    as text), and a script's abbreviation breaks silently when a new option shares it."""
    if isinstance(parser, CommandParser):
        parser.__class__ = _JsonAwareParser
    parser.allow_abbrev = False
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _make_json_aware(sub)


_ORJSON_OPTIONS = (
    orjson.OPT_INDENT_2
    | orjson.OPT_NON_STR_KEYS
    | orjson.OPT_PASSTHROUGH_DATETIME  # str(), as json.dumps(default=str) printed them
    | orjson.OPT_PASSTHROUGH_DATACLASS
)


# Lone UTF-16 surrogates: a "\ud800" escape in JSON that was read (a results line, an agent's
# reply) parses into one, and neither orjson nor a UTF-8 stdout can write it.
_LONE_SURROGATES = re.compile("[\ud800-\udfff]")


def printable_text(text: str) -> str:
    """``text`` with lone surrogates as U+FFFD: what a UTF-8 stream can write."""
    return _LONE_SURROGATES.sub("\ufffd", text)


def printable(value: Any) -> Any:
    """``value`` with lone surrogates as U+FFFD and NaN and infinities as null (as orjson
    writes them), for the rare document orjson refuses."""
    if isinstance(value, str):
        return printable_text(value)
    if isinstance(value, dict):
        return {printable(k if isinstance(k, str) else str(k)): printable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [printable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def dumps(document: Any) -> str:
    """The document as indented JSON (orjson: a 2,000-case run document in ~5 ms, not 150).
    What orjson refuses (lone surrogates, integers beyond 64 bits) is written by ``json``,
    surrogates as U+FFFD and big integers exactly."""
    try:
        return orjson.dumps(document, default=str, option=_ORJSON_OPTIONS).decode()
    except orjson.JSONEncodeError:
        return json.dumps(printable(document), indent=2, ensure_ascii=False, default=str)


def _unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says the database could not be connected to at all (no statement ran):
    Django wraps the driver's connect error, whose text names the connection, in its
    OperationalError and ``connection.connection`` stays None."""
    from django.db import connection

    return isinstance(exc, OperationalError) and connection.connection is None


# The exit code of an interrupted command: interfaces.md §2's code for an error without its own.
INTERRUPTED_EXIT_CODE = 2

# The exit code when stdout's reader went away: 128 + SIGPIPE, as a shell shows it for a
# command the signal ended (`cat big | head`); the command's own codes all mean something else.
EXIT_STDOUT_CLOSED = 141


class StdoutClosed(Exception):
    """Writing to stdout failed because its reader went away (a closed pipe)."""


class _PipeAware:
    """A stdout whose BrokenPipeError is :class:`StdoutClosed`: told apart from a broken
    pipe anywhere else (a socket), which is an error of the command."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> Any:
        try:
            return self._stream.write(text)
        except BrokenPipeError as exc:
            raise StdoutClosed from exc

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError as exc:
            raise StdoutClosed from exc

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _silence(stream: Any) -> None:
    """Point ``stream``'s file descriptor at /dev/null, so that what is still buffered in it
    and the interpreter's flush at exit write nowhere ("Exception ignored ... BrokenPipeError"
    and exit 120 otherwise). A stream without a descriptor has nothing to flush there."""
    try:
        fd = stream.fileno()
    except (AttributeError, io.UnsupportedOperation):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


class _TrackedOutput(OutputWrapper):
    """Django's output wrapper, remembering whether anything was written through it."""

    written = False

    def write(self, msg: str = "", style_func: Any = None, ending: str | None = None) -> None:
        self.written = True
        super().write(msg, style_func, ending)


class JsonCommand(BaseCommand):
    """Base for commands that print a JSON document with ``--json`` and text otherwise."""

    json_flag = True
    _as_json = False  # set from the options in ``execute``

    # stdout as Django sets it (``__init__``, ``execute`` with ``stdout=``, ``run_from_argv``
    # here), tracked: an interrupt prints its error object only on a stdout nothing reached.
    @property  # type: ignore[override]
    def stdout(self) -> OutputWrapper:
        return self._stdout

    @stdout.setter
    def stdout(self, value: OutputWrapper) -> None:
        if type(value) is OutputWrapper:
            value.__class__ = _TrackedOutput
        self._stdout = value

    def run_from_argv(self, argv: list[str]) -> None:
        """As a process (manage.py): an unexpected exception is an ``internal_error`` (exit
        2, the traceback on stderr), and a closed stdout ends the command with exit 141."""
        stdout = sys.stdout
        self.stdout = OutputWrapper(_PipeAware(stdout))
        try:
            try:
                super().run_from_argv(argv)
            except StdoutClosed:
                raise
            except Exception as exc:
                self.stderr.write(traceback.format_exc().rstrip("\n"))
                reason = (str(exc).strip().splitlines() or [""])[0][:300]
                message = f"internal error: {type(exc).__name__}" + (f": {reason}" if reason else "")
                self.print_error(
                    CliError("internal_error", message + "; this is a bug (the traceback is on stderr)")
                )
                sys.exit(2)
            finally:
                # What is still buffered is written now, where a closed pipe is caught, not by
                # the interpreter at exit ("Exception ignored ... BrokenPipeError", exit 120).
                self.stdout.flush()
        except StdoutClosed:
            _silence(stdout)
            sys.exit(EXIT_STDOUT_CLOSED)

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        _make_json_aware(parser)
        return parser

    def add_json_argument(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="print one JSON document on stdout")

    # Options that name files: a path may hold any bytes (Python decodes them with
    # surrogateescape); every other text option must be UTF-8 text (``check_text_options``).
    path_options: frozenset[str] = frozenset()

    def execute(self, *args: Any, **options: Any) -> Any:
        self._as_json = bool(options.get("json"))
        try:
            self.check_text_options(options)
            return super().execute(*args, **options)
        except CliError as exc:
            self.print_error(exc)
            sys.exit(exc.exit_code)
        except (OperationalError, ProgrammingError) as exc:
            # Every command that needs the database: one that was never migrated (an empty
            # var/db.sqlite3) is a usage error with the fix, not a "no such table" traceback;
            # one that cannot be reached at all (a server down, a wrong DATABASE_URL) says so.
            message = not_migrated_message(exc)
            if message is not None:
                self.print_error(CliError("database_not_ready", message))
                sys.exit(2)
            if not _unreachable(exc):
                raise
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
            self.print_error(
                CliError(
                    "database_unavailable",
                    f"cannot reach the database ({reason}); check DATABASE_URL and that the server runs",
                )
            )
            sys.exit(self.unavailable_exit_code)
        except broker.BrokerError as exc:
            # Like a database that cannot be reached: an infrastructure error with the fix.
            self.print_error(CliError(broker.CODE, broker.broker_message(exc)))
            sys.exit(self.unavailable_exit_code)
        except KeyboardInterrupt:
            self.print_interrupted()
            sys.exit(INTERRUPTED_EXIT_CODE)

    def print_interrupted(self) -> None:
        """Ctrl-C: one line on stderr and, under ``--json``, the ``interrupted`` error object
        on stdout if nothing is there yet (else stdout would hold a part and a document)."""
        partial = self._as_json and getattr(self.stdout, "written", False)
        self.stderr.write("interrupted" + ("; the JSON document on stdout is incomplete" if partial else ""))
        if self._as_json and not partial:
            self.print_error(CliError("interrupted", "interrupted before the command finished"))

    # The exit code of ``database_unavailable`` and ``broker_unavailable`` (``eval start``
    # lists them with its infra errors).
    unavailable_exit_code = 2

    def check_text_options(self, options: dict[str, Any]) -> None:
        """A usage error for a text option whose bytes were not UTF-8 (Python hands them over
        as lone surrogates, which reached a database query and ended in a traceback)."""
        for name, value in options.items():
            if name in self.path_options:
                continue
            for text in value if isinstance(value, list | tuple) else [value]:
                if isinstance(text, str) and _LONE_SURROGATES.search(text):
                    shown = name.replace("_", "-")
                    raise CliError(
                        "usage",
                        f"{shown} is not UTF-8 text ({printable_text(text)!r}); pass it as UTF-8",
                        field=name,
                    )

    def print_error(self, exc: CliError) -> None:
        if self._as_json:
            self.stdout.write(dumps(exc.as_json()))
        else:
            text = self.format_error_text(exc)
            self.stderr.write(printable_text(text))

    def format_error_text(self, exc: CliError) -> str:
        lines = [f"error: {exc.message}" + (f" ({exc.code})" if exc.code else "")]
        if exc.field:
            lines[0] = f"error: {exc.field}: {exc.message} ({exc.code})"
        if exc.choices:
            lines.append("choices:")
            lines.extend(f"  - {choice}" for choice in exc.choices)
        return "\n".join(lines)

    def emit(self, document: dict[str, Any], text: str) -> None:
        """Print ``document`` as JSON under ``--json``, else the readable ``text``."""
        if self._as_json:
            self.stdout.write(dumps(document))
        else:
            self.stdout.write(printable_text(text))
