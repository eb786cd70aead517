"""``manage.py eval start ...`` (spec/interfaces.md §6): create a run; with ``--follow`` wait
for it and exit with a CI-friendly code.

Exit codes with ``--follow``, first match wins: 2 usage or validation error; 3 the run ended
with any case still infra_error or config_error, or the run failed; 1 some lane's pass rate is
below ``--fail-under`` (a fraction, default 1.0) or null; 0 otherwise. Without ``--follow``:
``{"run": {...}}`` and exit 0 once the run is queued. The progress bar goes to stderr, and only
when stderr is a terminal. A run no worker has taken after 30 s (and again after 10 min) gets a
hint line on stderr on how to start one; the command keeps waiting.
"""

from __future__ import annotations

import contextlib
import gc
import signal
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from django.core.management.base import CommandParser
from django.db import connection, transaction

from agentclash_site.celery import preload_broker_transport
from agentclash_site.lib.cli import CliError, JsonCommand
from agentclash_site.lib.db import is_connection_error
from agentclash_site.lib.env import env_float
from agentclash_site.workspaces.models import Workspace
from runs.models import DeploymentKind, Run, RunItem, RunLane, RunStatus
from runs.services.runs import MAX_REPETITIONS, RunError, pack_version_for, run_create
from runs.states import RUN_FINISHED_CHANNEL

FINISHED = (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED)
POLL_SECONDS = 0.25
# On PostgreSQL the command LISTENs for the run's completion (runs.states NOTIFYs) and
# re-reads the status at least this often anyway (progress bar, a missed notification).
LISTEN_SECONDS = 1.0
FOLLOW_LIMIT_SECONDS = env_float("AGENTCLASH_FOLLOW_TIMEOUT", 7 * 24 * 3600, positive=True)
# Following survives the database going away (a restart, a failover) for this long: the
# run goes on on the workers, and a crash would exit 1, which reads as a failed eval.
RECONNECT_SECONDS = env_float("AGENTCLASH_FOLLOW_RECONNECT", 120)
# A run no worker has taken (still queued, no item ever claimed) this long after --follow
# began gets one hint line on stderr (how to start a worker), and once more at the second
# mark: without a worker the command waited silently, up to FOLLOW_LIMIT_SECONDS.
NO_WORKER_HINT_SECONDS = (30.0, 600.0)
NO_WORKER_HINT = (
    "no worker has picked up run {run} after {elapsed}: is a Celery worker running? Start one with"
    " `celery -A agentclash_site worker` (`make run` starts one too); still waiting"
)


def follow_exit_code(document: dict[str, Any], fail_under: float) -> int:
    """3 / 1 / 0 of interfaces.md §6 for a finished run's document (2 is raised earlier)."""
    if document["run"]["status"] == RunStatus.FAILED:
        return 3
    for lane in document["lanes"]:
        counts = lane["counts"]
        if counts.get("infra_error") or counts.get("config_error"):
            return 3
    for lane in document["lanes"]:
        rate = lane.get("pass_rate")
        if rate is None or rate < fail_under:
            return 1
        if fail_under >= 1.0 and lane["counts"].get("FAILED"):
            # the document's rate has 4 decimals: one failure in 20,000+ cases shows 1.0,
            # and the default 1.0 means "any failed case"
            return 1
    return 0


def render_text(document: dict[str, Any]) -> str:
    run = document["run"]
    pack = run["pack"]
    lines = [
        f"Run {run['id']}: {run['status']} (pack {pack['slug']} v{pack['number']}, "
        f"input set {run['input_set'] or '(none)'})",
        run["url"],
        "",
    ]
    for lane in document["lanes"]:
        c = lane["counts"]
        rate = lane["pass_rate"]
        interval = lane.get("pass_rate_interval")
        shown = "-" if rate is None else f"{rate:.4f}"
        if rate is not None and interval:
            shown += f" [{interval[0]:.4f}, {interval[1]:.4f}]"
        lines.append(
            f"  {lane['deployment']}: pass rate {shown}; passed {c['PASSED']}, failed {c['FAILED']}, "
            f"not evaluated {c['NOT_EVALUATED']}, unavailable {c['UNAVAILABLE']}, error {c['ERROR']}, "
            f"infra_error {c['infra_error']}, config_error {c['config_error']}, cancelled {c['cancelled']}, "
            f"pending {c['pending']}"
        )
    for case in document.get("cases") or []:
        if case["status"] != "PASSED":
            lines.append(
                f"    {case['deployment']} {case['challenge_key']}/{case['case_key']} #{case['repetition']}: "
                f"{case['status']} (attempts {case['attempts']})"
            )
    return "\n".join(lines) + "\n"


class Command(JsonCommand):
    help = "Start an evaluation run (and follow it)."
    # A CI command: the system checks import every URL conf and view before the run even
    # starts (about 0.2 s); ``manage.py check`` is the place for them.
    requires_system_checks: list[str] = []
    unavailable_exit_code = 3  # an infra error, like losing the database while following

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        start = sub.add_parser("start", help="create a run of a published pack version")
        start.add_argument("--workspace", required=True, help="workspace slug")
        start.add_argument("--pack", required=True, help="pack slug")
        start.add_argument("--pack-version", type=int, help="default: the highest published version")
        start.add_argument(
            "--input-set",
            help="input set id, key or exact name (case-insensitive); may be left out when the pack version"
            " has at most one",
        )
        start.add_argument(
            "--deployment", required=True, action="extend", nargs="+", help="deployment name(s); repeatable"
        )
        start.add_argument(
            "--repetitions",
            type=int,
            default=1,
            help=f"runs of each case per deployment, 1 to {MAX_REPETITIONS} (default 1)",
        )
        start.add_argument("--name", default="", help="an optional run name (at most 200 characters)")
        start.add_argument(
            "--follow",
            action="store_true",
            help="wait for the run and exit with its verdict: 0 ok, 1 a lane's pass rate below --fail-under"
            " or none, 3 infra or config errors or the run failed",
        )
        start.add_argument(
            "--fail-under",
            type=float,
            default=None,
            metavar="RATE",
            help="with --follow: exit 1 when a lane's pass rate is below RATE, a fraction from 0 to 1"
            " (default 1.0: any failed case)",
        )
        self.add_json_argument(start)

    def run_from_argv(self, argv: list[str]) -> None:
        # Run as its own process (manage.py, not call_command): what start-up built (about
        # 200k objects) lives to the end, and collecting it, during the run and at
        # interpreter exit, cost about 0.3 s.
        gc.freeze()
        super().run_from_argv(argv)

    def handle(self, *args: Any, **options: Any) -> None:
        fail_under = options.get("fail_under")
        if fail_under is not None and not options["follow"]:
            raise CliError("usage", "--fail-under needs --follow", field="fail_under")
        if fail_under is not None and not 0.0 <= fail_under <= 1.0:
            raise CliError("usage", "--fail-under is a fraction from 0 to 1", field="fail_under")
        workspace = Workspace.objects.filter(slug=options["workspace"]).first()
        if workspace is None:
            raise CliError("unknown_workspace", f"no workspace {options['workspace']!r}", field="workspace")
        # The broker client's imports (~65 ms for Redis) overlap the run's database work:
        # eval start without --follow 473 -> 454 ms (median of 12 alternated).
        preload_broker_transport()
        held = _HeldInterrupts()
        try:
            version = pack_version_for(workspace, options["pack"], options.get("pack_version"))
            # In a transaction of its own: Ctrl-C is held back from just before the commit
            # until the run can be named (the run's tasks are enqueued on commit meanwhile).
            with transaction.atomic():
                run = run_create(
                    workspace=workspace,
                    user=None,
                    pack_version=version,
                    input_set=options.get("input_set"),
                    deployments=options["deployment"],
                    repetitions=options["repetitions"],
                    name=options.get("name") or "",
                )
                held.hold()
        except RunError as exc:
            # The service names the API's body key; the CLI's option is --deployment.
            field = "deployment" if exc.field == "deployments" else exc.field
            raise CliError(exc.code, exc.message, field=field, choices=exc.choices) from exc
        except BaseException:
            # The commit or the enqueue failed (a broker down names the run in its own error):
            # an interrupt held meanwhile is dropped rather than raised over that error.
            held.release(drop=True)
            raise
        with _interrupts_name(run, workspace.slug, tty=self.stderr.isatty(), held=held):
            # Imported after the run is queued: the worker starts while this process loads
            # the document code (it pulls in the grading engine).
            from runs.documents import run_document

            if not options["follow"]:
                document = {"run": run_document(run)["run"]}
                self.emit(document, f"Run {run.pk} queued: {document['run']['url']}\n")
                return
            document = self.follow(run)
        self.emit(document, render_text(document))
        code = follow_exit_code(document, 1.0 if fail_under is None else fail_under)
        if code:
            self.stdout.flush()
            sys.exit(code)

    # The time source and the wait between polls (a test injects a fake clock).
    clock = staticmethod(time.monotonic)
    sleep = staticmethod(time.sleep)

    def follow(self, run: Run) -> dict[str, Any]:
        from runs.documents import run_document

        tty = self.stderr.isatty()
        started = self.clock()
        deadline = started + FOLLOW_LIMIT_SECONDS
        hints = list(NO_WORKER_HINT_SECONDS)  # the marks not reached yet
        total = max(1, run.items_total)
        listening: bool | None = None  # LISTEN again after a reconnect
        lost_since: float | None = None
        while True:
            try:
                if listening is None:
                    listening = _listen()
                row = Run.objects.filter(pk=run.pk).values("status", "items_open").get()
                lost_since = None
                if tty:
                    done = total - max(0, row["items_open"])
                    width = 30
                    filled = int(width * done / total)
                    self.stderr.write(
                        f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {row['status']}  ",
                        ending="",
                    )
                    self.stderr.flush()
                if row["status"] in FINISHED:
                    break
                if hints and self.clock() - started >= hints[0]:
                    hints.pop(0)
                    if row["status"] == RunStatus.QUEUED and _untaken(run):
                        elapsed = _duration(self.clock() - started)
                        hint = NO_WORKER_HINT.format(run=run.pk, elapsed=elapsed)
                        self.stderr.write(("\n" if tty else "") + hint)
                if self.clock() >= deadline:
                    raise CliError(
                        "follow_timeout",
                        f"the run did not finish within {FOLLOW_LIMIT_SECONDS:.0f}s; it goes on: run status {run.pk}",
                        exit_code=3,
                    )
                if listening:
                    _wait_notify(str(run.pk), min(LISTEN_SECONDS, max(0.0, deadline - self.clock())))
                else:
                    self.sleep(POLL_SECONDS)
            except Exception as exc:
                if not is_connection_error(exc):
                    raise
                lost_since = lost_since if lost_since is not None else self.clock()
                if self.clock() - lost_since >= RECONNECT_SECONDS:
                    raise CliError(
                        "database_unavailable",
                        f"lost the database connection while following the run and could not reconnect"
                        f" within {RECONNECT_SECONDS:.0f}s ({str(exc).strip()[:200]}); the run goes on:"
                        f" run status {run.pk}",
                        exit_code=3,
                    ) from exc
                connection.close()  # the next query connects again
                listening = None
                self.sleep(min(1.0, RECONNECT_SECONDS / 20))
        if tty:
            self.stderr.write("")
        return run_document(run, cases=True)


def _untaken(run: Run) -> bool:
    """Whether ``run`` waits for a worker: it has a lane that calls its agent (a trace_import
    lane waits for an upload, not a worker) and no item of it was ever claimed."""
    calling = RunLane.objects.filter(run_id=run.pk).exclude(deployment_kind=DeploymentKind.TRACE_IMPORT)
    return calling.exists() and not RunItem.objects.filter(run_id=run.pk, claims__gt=0).exists()


def _duration(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 120 else f"{seconds:.0f} s"


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


_INTERRUPTS = {signal.SIGINT, signal.SIGTERM}


class _HeldInterrupts:
    """SIGINT and SIGTERM blocked (left pending by the kernel) from just before the run's
    commit until ``_interrupts_name`` can name the run: a Ctrl-C while the committed run's
    tasks were enqueued (or in the step after) ended in a traceback, the run's id never
    printed. Main thread only (signals are delivered there)."""

    def __init__(self) -> None:
        self._previous: set[signal.Signals] | None = None

    def hold(self) -> None:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.pthread_sigmask(signal.SIG_BLOCK, _INTERRUPTS)

    def release(self, *, drop: bool = False) -> None:
        """Unblock: a held signal is delivered now (its handler runs), or ignored with
        ``drop``."""
        if self._previous is None:
            return
        previous, self._previous = self._previous, None
        if not drop:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)
            return
        handlers = {signum: signal.signal(signum, signal.SIG_IGN) for signum in _INTERRUPTS}
        try:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        finally:
            for signum, handler in handlers.items():
                signal.signal(signum, handler)


@contextlib.contextmanager
def _interrupts_name(
    run: Run, workspace: str, *, tty: bool, held: _HeldInterrupts | None = None
) -> Iterator[None]:
    """Ctrl-C, or SIGTERM (a CI job cancelled), once the run is queued: the ``interrupted``
    error naming the run, which goes on (exit 3, as ``follow_timeout``), not a traceback, or
    nothing at all, with the run's id never printed. An interrupt ``held`` since the commit
    is delivered here, once the handlers are in place."""
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _raise_interrupt) if main else None
    try:
        if held is not None:
            held.release()
        yield
    except KeyboardInterrupt:
        if tty:
            sys.stderr.write("\n")  # after the progress bar's line
        raise CliError(
            "interrupted",
            f"stopped waiting for run {run.pk}; the run goes on (cancel it on its page or with"
            f" POST /api/v1/workspaces/{workspace}/runs/{run.pk}/cancel): run status {run.pk}",
            exit_code=3,
        ) from None
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)


def _listen() -> bool:
    """LISTEN for finished runs (PostgreSQL, autocommit); False elsewhere (then poll)."""
    if connection.vendor != "postgresql" or connection.in_atomic_block:
        return False
    with connection.cursor() as cursor:
        cursor.execute(f"LISTEN {RUN_FINISHED_CHANNEL}")
    return True


def _wait_notify(run_id: str, timeout: float) -> None:
    """Return when run ``run_id`` NOTIFYs that it finished, or after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while (left := end - time.monotonic()) > 0:
        for notify in connection.connection.notifies(timeout=left, stop_after=1):
            if notify.payload == run_id:
                return
