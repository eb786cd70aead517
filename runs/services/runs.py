"""``run_create``: validate a run request, create the run, its lanes and items, queue it.

Errors raise :class:`RunError` with the stable codes of the specs (400 in the API, exit 2
in the CLI): ``pack_version_not_published``, ``missing_challenge_input_set_id``,
``ambiguous_challenge_input_set``, ``invalid_challenge_input_set_id``,
``missing_deployment``, ``invalid_deployment``, ``duplicate_deployment``,
``unsupported_execution_mode``, ``invalid_repetitions``, ``invalid_max_in_flight``,
``invalid_name``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from django.db import connection, transaction
from django.db.models import Max, Q

from agentclash_site.lib.broker import BrokerError, BrokerUnavailable
from packs.bundle import SelectionError, select_input_set
from packs.models import Case, Challenge, InputSet, Pack, PackVersion
from runs.lane_settings import CallSettings
from runs.models import (
    MAX_IN_FLIGHT_LIMIT,
    Deployment,
    DeploymentKind,
    ItemState,
    LaneStatus,
    Run,
    RunItem,
    RunLane,
    RunStatus,
)
from runs.states import transition_lane, transition_run

MAX_REPETITIONS = 10

# Which pack execution modes each deployment kind runs (spec/agent-protocol.md).
SUPPORTED_MODES: dict[str, frozenset[str]] = {
    DeploymentKind.HOSTED_HTTP: frozenset({"native", "prompt_eval"}),
    DeploymentKind.TRACE_IMPORT: frozenset({"native", "prompt_eval"}),
    DeploymentKind.OPENAI_CHAT: frozenset({"native", "prompt_eval"}),
}


class RunError(Exception):
    """A run request or operation that cannot be done; ``code`` is stable snake_case."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        field: str | None = None,
        choices: list[str] | None = None,
        status_code: int = 400,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field
        self.choices = choices
        self.status_code = status_code

    def to_dict(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.field is not None:
            error["field"] = self.field
        if self.choices is not None:
            error["choices"] = self.choices
        return {"error": error}


def pack_version_for(workspace: Any, slug: str, number: int | None) -> PackVersion:
    """The published version ``number`` (default: the highest) of the workspace's pack ``slug``."""
    pack = Pack.objects.filter(workspace=workspace, slug=slug).first()
    if pack is None:
        raise RunError("invalid_pack", f"no pack {slug!r} in this workspace; publish it first", field="pack")
    if number is None:
        number = PackVersion.objects.filter(pack=pack).aggregate(n=Max("number"))["n"]
    # The stored bundle and manifest are not needed to create a run (the worker reads them).
    version = (
        PackVersion.objects.filter(pack=pack, number=number)
        .select_related("pack")
        .defer("source", "manifest", "warnings", "critique_findings")
        .first()
    )
    if version is None:
        raise RunError(
            "invalid_pack_version",
            f"pack {slug!r} has no published version {number}",
            field="pack_version",
            choices=[str(n) for n in PackVersion.objects.filter(pack=pack).values_list("number", flat=True)],
        )
    return version


def _canonical_uuid(text: str) -> str | None:
    """A UUID's stored form (read ignoring case), or None when ``text`` is not one."""
    try:
        return str(uuid.UUID(text))
    except ValueError:
        return None


def select_run_input_set(pack_version: PackVersion, selector: Any) -> InputSet | None:
    """The input set of ``pack_version`` a selector names (pack-format §13), or None for
    the zero-set run. ``selector``: an InputSet, its public id, key or exact name, or None."""
    if isinstance(selector, InputSet):
        selector = str(selector.public_id)
    sets = list(InputSet.objects.filter(version=pack_version).order_by("position", "id"))
    ids = {s.key: str(s.public_id) for s in sets}
    text = None if selector is None else str(selector).strip()
    other: set[str] = set()
    as_id = _canonical_uuid(text) if text else None
    if (
        as_id is not None
        and as_id not in ids.values()
        # Only this workspace's sets: an id of another workspace is answered as unknown, so
        # the answer never tells that it exists.
        and InputSet.objects.filter(
            public_id=text, version__pack__workspace_id=pack_version.pack.workspace_id
        )
        .exclude(version=pack_version)
        .exists()
    ):
        other.add(as_id)
    manifest = {"input_sets": [{"key": s.key, "name": s.name} for s in sets]}
    try:
        selection = select_input_set(manifest, text, input_set_ids=ids, other_version_ids=other)
    except SelectionError as exc:
        raise RunError(exc.code, exc.message, field="input_set", choices=exc.choices) from exc
    if selection.input_set is None:
        return None
    return next(s for s in sets if s.key == selection.key)


def resolve_deployments(workspace: Any, deployments: Iterable[Any]) -> list[Deployment]:
    """Deployments of ``workspace`` named by instance, public id or name; in the given order."""
    wanted = list(deployments or [])
    if not wanted:
        raise RunError("missing_deployment", "name at least one deployment", field="deployments")
    out: list[Deployment] = []
    seen: set[int] = set()
    for ref in wanted:
        if isinstance(ref, Deployment):
            found = ref if ref.workspace_id == workspace.pk else None
        else:
            text = str(ref).strip()
            query = Q(name=text)
            if _canonical_uuid(text) is not None:
                query |= Q(public_id=text)
            found = Deployment.objects.filter(query, workspace=workspace).first()
        if found is None:
            raise RunError(
                "invalid_deployment",
                f"no deployment {str(ref)!r} in this workspace; create it first or check the name",
                field="deployments",
                choices=list(Deployment.objects.for_workspace(workspace).values_list("name", flat=True)),
            )
        if found.pk in seen:
            raise RunError(
                "duplicate_deployment",
                f"deployment {found.name!r} is named twice; name each deployment once",
                field="deployments",
            )
        seen.add(found.pk)
        out.append(found)
    return out


def _check_int(value: Any, field: str, low: int, high: int, code: str) -> int:
    if isinstance(value, bool):
        raise RunError(code, f"{field} must be a whole number from {low} to {high}", field=field)
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise RunError(code, f"{field} must be a whole number from {low} to {high}", field=field) from None
    if number != value and not (isinstance(value, str) and value.strip().lstrip("-").isdigit()):
        raise RunError(code, f"{field} must be a whole number from {low} to {high}", field=field)
    if not low <= number <= high:
        raise RunError(code, f"{field} must be from {low} to {high} (got {number})", field=field)
    return number


def run_create(
    *,
    workspace: Any,
    user: Any,
    pack_version: Any,
    input_set: Any = None,
    deployments: Sequence[Any],
    repetitions: Any = 1,
    name: str = "",
    max_in_flight: Any = None,
    enqueue: bool = True,
) -> Run:
    """Create a queued run: one lane per deployment, one item per lane x case x repetition.

    Dispatch is enqueued on commit (``enqueue=False`` leaves that to the caller, e.g. tests
    that drive the dispatcher directly).
    """
    if not isinstance(pack_version, PackVersion) or pack_version.pk is None:
        raise RunError(
            "pack_version_not_published",
            "runs use a published pack version; publish the draft first",
            field="pack_version",
        )
    if pack_version.pack.workspace_id != workspace.pk:
        raise RunError(
            "invalid_pack_version", "the pack version is not in this workspace", field="pack_version"
        )
    reps = _check_int(repetitions, "repetitions", 1, MAX_REPETITIONS, "invalid_repetitions")
    limit = None
    if max_in_flight is not None and max_in_flight != "":
        limit = _check_int(max_in_flight, "max_in_flight", 1, MAX_IN_FLIGHT_LIMIT, "invalid_max_in_flight")
    name = (name or "").strip()
    if len(name) > 200:
        raise RunError("invalid_name", "name must be at most 200 characters", field="name")
    chosen_set = select_run_input_set(pack_version, input_set)
    lanes_for = resolve_deployments(workspace, deployments)
    mode = pack_version.execution_mode
    if _is_voice_pack(pack_version):
        raise RunError(
            "unsupported_execution_mode",
            "voice packs (modality: voice) are not run in this version; they validate and publish",
            field="pack",
        )
    for deployment in lanes_for:
        if mode not in SUPPORTED_MODES.get(deployment.kind, frozenset()):
            raise RunError(
                "unsupported_execution_mode",
                f"deployment {deployment.name!r} ({deployment.kind}) cannot run {mode!r} packs",
                field="deployments",
            )

    # The cases to run, in input-set order: (challenge_id, case_id | None, challenge_key, case_key).
    if chosen_set is None:
        cases = [
            (ch_id, None, key, key)
            for ch_id, key in Challenge.objects.filter(version=pack_version)
            .order_by("position", "id")
            .values_list("id", "key")
        ]
    else:
        cases = [
            (ch_id, case_id, ch_key, case_key)
            for case_id, ch_id, ch_key, case_key in Case.objects.filter(input_set=chosen_set)
            .order_by("position", "id")
            .values_list("id", "challenge_id", "challenge__key", "case_key")
        ]

    with transaction.atomic():
        run = Run.objects.create(
            workspace=workspace,
            pack_version=pack_version,
            input_set=chosen_set,
            name=name,
            status=RunStatus.DRAFT,
            repetitions=reps,
            max_in_flight=limit,
            created_by=user if getattr(user, "pk", None) else None,
        )
        lanes = RunLane.objects.bulk_create(
            [
                RunLane(
                    run=run,
                    deployment=d,
                    deployment_name=d.name,
                    deployment_kind=d.kind,
                    settings=CallSettings.of_deployment(d).to_json(),
                    position=i,
                    pending=len(cases) * reps,
                    counters={},
                )
                for i, d in enumerate(lanes_for)
            ]
        )
        total = insert_items(run, lanes, cases, reps)
        Run.objects.filter(pk=run.pk).update(items_total=total, items_open=total)
        run.items_total = run.items_open = total
        transition_run(run, RunStatus.QUEUED, reason="created")
        # An earlier run of this version and input set already probed these cases.
        has_findings = bool(total) and Run.objects.copy_previous_findings(run)
        if not total:
            # A pack version with nothing to run: complete at once (nothing can fail).
            for lane in lanes:
                transition_lane(lane, LaneStatus.SCORING, reason="no cases")
        _lock_kinds(lanes_for)
        if enqueue:
            run_id = run.pk
            transaction.on_commit(lambda: enqueue_run(run_id, probe=not has_findings))
    return run


def _lock_kinds(deployments: Sequence[Deployment]) -> None:
    """Refuse a deployment whose kind changed after it was resolved above (and checked
    against the execution mode): its lane would keep the old kind while its dispatcher
    called the new one. On PostgreSQL the rows are read ``FOR KEY SHARE`` (last in the
    transaction: the dispatchers' claims lock the same rows ``FOR UPDATE``), so a kind change
    that locked a row first (``ensure_kind_may_change``) has committed when this reads it, and
    one that comes later waits for this run's commit and then sees its lane. (The lanes' own
    foreign keys are checked only at commit, deferred, so they order nothing before that.)
    On SQLite the transaction holds the database's write lock."""
    ids = sorted(d.pk for d in deployments)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT id, kind FROM runs_deployment WHERE id = ANY(%s) ORDER BY id FOR KEY SHARE", [ids]
            )
            kinds = dict(cursor.fetchall())
    else:
        kinds = dict(Deployment.objects.filter(pk__in=ids).values_list("pk", "kind"))
    for deployment in deployments:
        now = kinds.get(deployment.pk)
        if now != deployment.kind:
            raise RunError(
                "deployment_changed",
                f"deployment {deployment.name!r} changed from {deployment.kind} to {now} while the"
                " run was created; start the run again",
                field="deployments",
                status_code=409,
            )


# The columns that differ between the new items of a run; the others take the values of
# a fresh RunItem (its field defaults).
_ITEM_VARYING = (
    "lane_id",
    "deployment_id",
    "challenge_id",
    "case_id",
    "challenge_key",
    "case_key",
    "position",
    "repetition",
)


def insert_items(run: Run, lanes: Sequence[RunLane], cases: Sequence[tuple[Any, ...]], reps: int) -> int:
    """Insert the pending items of a new run (lane x case x repetition, in input-set
    order); returns how many. On PostgreSQL with COPY (several times faster than
    ``bulk_create``'s multi-row INSERT, ARCHITECTURE.md "Measured facts"; no model instances
    are built), elsewhere with ``bulk_create``."""
    keys = [
        (lane.pk, lane.deployment_id, ch_id, case_id, ch_key, case_key, pos, rep)
        for lane in lanes
        for pos, (ch_id, case_id, ch_key, case_key) in enumerate(cases)
        for rep in range(1, reps + 1)
    ]
    if connection.vendor != "postgresql" or not keys:
        RunItem.objects.bulk_create(
            [
                RunItem(run=run, state=ItemState.PENDING, **dict(zip(_ITEM_VARYING, k, strict=True)))
                for k in keys
            ],
            batch_size=2000,
        )
        return len(keys)
    template = RunItem(run=run, state=ItemState.PENDING)
    fields = [f for f in RunItem._meta.concrete_fields if not f.primary_key]
    columns = [f.attname for f in fields]
    fixed = [f.get_db_prep_save(getattr(template, f.attname), connection) for f in fields]
    slots = [columns.index(name) for name in _ITEM_VARYING]
    names = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    connection.ensure_connection()
    sql = f"COPY {RunItem._meta.db_table} ({names}) FROM STDIN"
    with connection.connection.cursor() as cursor, cursor.copy(sql) as copy:
        row = list(fixed)
        for key in keys:
            for slot, value in zip(slots, key, strict=True):
                row[slot] = value
            copy.write_row(row)
    return len(keys)


def _is_voice_pack(version: PackVersion) -> bool:
    """pack-format §13: runs of voice packs are refused. Asked of the database: the manifest
    of a big pack is megabytes, and only its ``modality`` matters here."""
    return PackVersion.objects.filter(pk=version.pk, manifest__modality="voice").exists()


def enqueue_run(run_id: Any, *, probe: bool = True) -> None:
    """Start work for a run: one dispatch task per calling lane (and the probe task, unless
    the run already has its findings), or finish an empty run."""
    from runs import tasks

    lanes = list(
        RunLane.objects.filter(run_id=run_id, status__in=[LaneStatus.QUEUED, LaneStatus.RUNNING]).values_list(
            "id", "deployment_kind"
        )
    )
    calling = [lane_id for lane_id, kind in lanes if kind != DeploymentKind.TRACE_IMPORT]
    try:
        for lane_id in calling:
            tasks.dispatch_lane.delay(lane_id)
        if calling and probe:
            # On another worker process, while the calls go out (runs.probing).
            tasks.probe_run.delay(str(run_id))
        tasks.check_run.delay(str(run_id))
    except BrokerError as exc:
        # The run is committed: the sweeper dispatches its lanes once the broker is back.
        unavailable = BrokerUnavailable(
            str(exc),
            after=f"Run {run_id} is stored and queued; its work is sent once the broker is back "
            f"(run status {run_id})",
            run_id=run_id,
        )
        raise unavailable from exc
