"""Runs app models.

Deployment: an agent under test, owned by a workspace (spec/agent-protocol.md
"Deployment fields"). Its JSON ``config`` is read through
:class:`runs.deployment_config.DeploymentConfig` (a pydantic model, in its own module so that
loading the models does not import pydantic: every command's start-up pays for what
``django.setup()`` imports).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from agentclash_site.lib.crypto import decrypt_text, encrypt_text

if TYPE_CHECKING:
    from runs.deployment_config import DeploymentConfig

# --- Deployment ---------------------------------------------------------------------------


class DeploymentKind(models.TextChoices):
    HOSTED_HTTP = "hosted_http", "Hosted HTTP agent"
    OPENAI_CHAT = "openai_chat", "OpenAI-compatible chat model"
    TRACE_IMPORT = "trace_import", "Trace import (results uploaded)"


class EvidenceLevel(models.TextChoices):
    STRUCTURED = "structured", "Structured (tool calls, files, tasks reported)"
    BLACK_BOX = "black_box", "Black box (final output and messages only)"


MAX_IN_FLIGHT_LIMIT = 512
MAX_TIMEOUT_SECONDS = 3600.0
MAX_ATTEMPTS_LIMIT = 10


class DeploymentQuerySet(models.QuerySet["Deployment"]):
    def for_workspace(self, workspace: Any) -> DeploymentQuerySet:
        """A workspace's deployments by name (served by the name unique index)."""
        return self.filter(workspace=workspace).order_by("name")


class Deployment(models.Model):
    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    workspace = models.ForeignKey(
        "workspaces.Workspace", on_delete=models.CASCADE, related_name="deployments"
    )
    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=20, choices=DeploymentKind.choices)
    # endpoint_url for hosted_http, base_url for openai_chat, empty for trace_import.
    url = models.CharField(max_length=2000, blank=True, default="")
    model = models.CharField(max_length=200, blank=True, default="")
    # Fernet tokens (agentclash_site.lib.crypto). Never rendered, never in API output.
    secret_encrypted = models.TextField(blank=True, default="", editable=False)
    signing_key_encrypted = models.TextField(blank=True, default="", editable=False)
    max_in_flight = models.PositiveIntegerField(default=8)
    timeout_seconds = models.FloatField(default=120.0)
    max_attempts = models.PositiveSmallIntegerField(default=3)
    evidence_level = models.CharField(
        max_length=20, choices=EvidenceLevel.choices, default=EvidenceLevel.STRUCTURED
    )
    config = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    objects = DeploymentQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [
            # Also the index of the list page query (workspace = ? ORDER BY name).
            models.UniqueConstraint(fields=["workspace", "name"], name="runs_deployment_name_unique"),
            models.CheckConstraint(condition=~Q(name=""), name="runs_deployment_name_not_blank"),
            models.CheckConstraint(
                condition=Q(kind__in=DeploymentKind.values), name="runs_deployment_kind_valid"
            ),
            models.CheckConstraint(
                condition=Q(evidence_level__in=EvidenceLevel.values),
                name="runs_deployment_evidence_level_valid",
            ),
            models.CheckConstraint(
                condition=Q(max_in_flight__gte=1, max_in_flight__lte=MAX_IN_FLIGHT_LIMIT),
                name="runs_deployment_max_in_flight_range",
            ),
            models.CheckConstraint(
                condition=Q(timeout_seconds__gt=0, timeout_seconds__lte=MAX_TIMEOUT_SECONDS),
                name="runs_deployment_timeout_range",
            ),
            models.CheckConstraint(
                condition=Q(max_attempts__gte=1, max_attempts__lte=MAX_ATTEMPTS_LIMIT),
                name="runs_deployment_max_attempts_range",
            ),
            models.CheckConstraint(
                condition=Q(kind=DeploymentKind.TRACE_IMPORT) | ~Q(url=""),
                name="runs_deployment_url_required",
            ),
            models.CheckConstraint(
                condition=~Q(kind=DeploymentKind.OPENAI_CHAT) | ~Q(model=""),
                name="runs_deployment_model_required",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"

    # --- per-kind names of the one URL column ---

    @property
    def endpoint_url(self) -> str | None:
        return self.url if self.kind == DeploymentKind.HOSTED_HTTP else None

    @property
    def base_url(self) -> str | None:
        return self.url if self.kind == DeploymentKind.OPENAI_CHAT else None

    @property
    def calls_out(self) -> bool:
        """Whether runs call this deployment (trace imports are uploaded instead)."""
        return self.kind != DeploymentKind.TRACE_IMPORT

    # --- secrets: write-only from the outside ---

    @property
    def has_secret(self) -> bool:
        return bool(self.secret_encrypted)

    @property
    def has_signing_key(self) -> bool:
        return bool(self.signing_key_encrypted)

    def set_secret(self, plain: str | None) -> None:
        self.secret_encrypted = encrypt_text(plain) if plain else ""

    def get_secret(self) -> str | None:
        """The decrypted secret, for executors only. Never render or log it."""
        return decrypt_text(self.secret_encrypted) if self.secret_encrypted else None

    def set_signing_key(self, plain: str | None) -> None:
        self.signing_key_encrypted = encrypt_text(plain) if plain else ""

    def get_signing_key(self) -> str | None:
        return decrypt_text(self.signing_key_encrypted) if self.signing_key_encrypted else None

    @property
    def typed_config(self) -> DeploymentConfig:
        from runs.deployment_config import DeploymentConfig

        return DeploymentConfig.model_validate(self.config or {})


# --- Runs -------------------------------------------------------------------------------------
#
# Run -> RunLane (one per deployment) -> RunItem (one per lane x case x repetition) -> Attempt.
# State machines are in runs/states.py; who writes what is in runs/MODELS.md.


class RunStatus(models.TextChoices):
    DRAFT = "draft", "Draft"
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SCORING = "scoring", "Scoring"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


class LaneStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SCORING = "scoring", "Scoring"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


class ItemState(models.TextChoices):
    PENDING = "pending", "Pending"  # waits for a claim (trace_import: for its uploaded result)
    CLAIMED = "claimed", "Claimed"  # a dispatcher owns it until claim_deadline
    DONE = "done", "Done"  # graded, or ended with an attempt category (infra/config error)
    CANCELLED = "cancelled", "Cancelled"


class AttemptCategoryChoice(models.TextChoices):
    OK = "ok", "ok"
    INFRA_ERROR = "infra_error", "infra_error"
    CONFIG_ERROR = "config_error", "config_error"
    CANCELLED = "cancelled", "cancelled"


class GradeStatus(models.TextChoices):
    PASSED = "PASSED", "PASSED"
    FAILED = "FAILED", "FAILED"
    NOT_EVALUATED = "NOT_EVALUATED", "NOT_EVALUATED"
    UNAVAILABLE = "UNAVAILABLE", "UNAVAILABLE"
    ERROR = "ERROR", "ERROR"


# Large columns the execution path never reads through a Run instance (with
# ``select_related("pack_version")``): the stored probe findings (about 0.5 kB per case, read
# by ``runs.probing.load_stored_findings``) and the version's bundle (read once per process
# by ``runs.packdata``).
RUN_HEAVY_FIELDS = ("case_findings", "pack_version__source", "pack_version__manifest")


class RunQuerySet(models.QuerySet["Run"]):
    def light(self) -> RunQuerySet:
        """Runs with their pack version and input set, without ``RUN_HEAVY_FIELDS``: a run
        of 9,900 cases read plainly, then ``run.pack_version``, held ~30 MB of parsed
        findings, manifest and source that no worker task or page reads from the instance."""
        return self.select_related("pack_version", "pack_version__pack", "input_set").defer(*RUN_HEAVY_FIELDS)

    def copy_previous_findings(self, run: Run) -> bool:
        """Give ``run`` the stored probe findings of the latest other run of the same pack
        version and input set (findings depend on the spec and the cases only), copied inside
        the database: the document never travels through this process. True when it copied
        them (the run had none and an earlier run has them); one guarded UPDATE.

        Done when a run is created, so its dispatchers read stored findings from their first
        slice instead of probing every case again, and by ``runs.probing.probe_run``."""
        previous = (
            self.model.objects.filter(
                pack_version_id=run.pack_version_id,
                input_set_id=run.input_set_id,
                case_findings__isnull=False,
            )
            .exclude(pk=run.pk)
            .order_by("-created_at")
        )
        copied = (
            self.model.objects.filter(pk=run.pk, case_findings__isnull=True)
            .filter(models.Exists(previous))
            .update(case_findings=models.Subquery(previous.values("case_findings")[:1]))
        )
        return copied > 0


class Run(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    workspace = models.ForeignKey("workspaces.Workspace", on_delete=models.CASCADE, related_name="runs")
    pack_version = models.ForeignKey("packs.PackVersion", on_delete=models.PROTECT, related_name="runs")
    # Null: the zero-set run (one empty case per challenge, pack-format §13).
    input_set = models.ForeignKey(
        "packs.InputSet", on_delete=models.PROTECT, null=True, blank=True, related_name="runs"
    )
    name = models.CharField(max_length=200, blank=True, default="")
    status = models.CharField(max_length=20, choices=RunStatus.choices, default=RunStatus.DRAFT)
    status_reason = models.CharField(max_length=500, blank=True, default="")
    repetitions = models.PositiveSmallIntegerField(default=1)
    # Overrides every lane's deployment.max_in_flight downwards when set.
    max_in_flight = models.PositiveIntegerField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    queued_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Counters (F() updates): items in the run, items still pending or claimed.
    items_total = models.PositiveIntegerField(default=0)
    items_open = models.IntegerField(default=0)
    # Bumped by rescore; RunItem.scoring_revision says which revision an item's grade is.
    scoring_revision = models.PositiveIntegerField(default=1)
    # Computed once when the run completes (runs.scoring): lanes' intervals, ranking,
    # run health (eval_feedback). Null until then.
    stats = models.JSONField(null=True, blank=True)
    # Baseline-probe findings per case ("challenge\x1fcase" -> [suggestion dicts]), computed
    # once per run and passed to grade_case so it is not recomputed per item.
    case_findings = models.JSONField(null=True, blank=True)
    # Judge budget counters (updated with F() by runs.judging).
    judge_calls = models.PositiveIntegerField(default=0)
    judge_input_tokens = models.BigIntegerField(default=0)
    judge_output_tokens = models.BigIntegerField(default=0)
    judge_cost_usd = models.FloatField(default=0.0)
    # Who scores the run, until when (runs.scoring.scoring_lock, every backend): claimed by a
    # compare-and-set UPDATE, renewed while the scoring goes on, expires when its process
    # died; the run's outcome is written only under it.
    scoring_owner = models.CharField(max_length=64, blank=True, default="")
    scoring_until = models.DateTimeField(null=True, blank=True)

    objects = RunQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["workspace", "-created_at"], name="runs_run_ws_created"),
            models.Index(fields=["status"], name="runs_run_status"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(status__in=RunStatus.values), name="runs_run_status_valid"),
            models.CheckConstraint(
                condition=Q(repetitions__gte=1, repetitions__lte=10), name="runs_run_repetitions_range"
            ),
        ]

    def __str__(self) -> str:
        return self.name or str(self.id)

    @property
    def is_finished(self) -> bool:
        return self.status in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED)


class RunLane(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="lanes")
    deployment = models.ForeignKey(Deployment, on_delete=models.PROTECT, related_name="lanes")
    deployment_name = models.CharField(max_length=100)  # as it was when the run was created
    deployment_kind = models.CharField(max_length=20, choices=DeploymentKind.choices)
    # The deployment's call settings as they were when the run was created
    # (runs.lane_settings.CallSettings.to_json): every call of the run uses them. No secret,
    # signing key or header value: those are read live from the deployment.
    settings = models.JSONField(default=dict, blank=True)
    position = models.PositiveSmallIntegerField(default=0)
    status = models.CharField(max_length=20, choices=LaneStatus.choices, default=LaneStatus.QUEUED)
    # Grade-status and attempt-category counts, updated as grades land (never by scanning).
    passed = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    not_evaluated = models.PositiveIntegerField(default=0)
    unavailable = models.PositiveIntegerField(default=0)
    errored = models.PositiveIntegerField(default=0)  # grade status ERROR
    infra_error = models.PositiveIntegerField(default=0)
    config_error = models.PositiveIntegerField(default=0)
    cancelled = models.PositiveIntegerField(default=0)
    pending = models.IntegerField(default=0)  # pending + claimed items
    score_sum = models.FloatField(default=0.0)
    scored = models.PositiveIntegerField(default=0)
    agent_input_tokens = models.BigIntegerField(default=0)
    agent_output_tokens = models.BigIntegerField(default=0)
    agent_cost_usd = models.FloatField(default=0.0)
    # Judge spend, kept apart from the agent's (judge_calls: every sample is one call).
    judge_calls = models.PositiveIntegerField(default=0)
    judge_input_tokens = models.BigIntegerField(default=0)
    judge_output_tokens = models.BigIntegerField(default=0)
    judge_cost_usd = models.FloatField(default=0.0)
    # What those calls counted against the lane's judge_limits share (grading.md §6.4): the
    # reported usage, or a call's reservation when its provider reported none. A resumed
    # lane's budget is rebuilt from these; they are never shown as cost.
    judge_charged_tokens = models.BigIntegerField(default=0)
    judge_charged_usd = models.FloatField(default=0.0)
    # grading.engine.aggregate.LaneCounters.to_dict(): per-challenge tallies, the per-case
    # repetition sums of §10.3, dimension means, the latency histogram. Read-modify-write
    # under the lane's row lock, in the same transaction as the grades it counts.
    counters = models.JSONField(default=dict, blank=True)
    # Computed once at completion (aggregate_lane: intervals, challenges, percentiles).
    stats = models.JSONField(null=True, blank=True)
    # A live dispatcher refreshes this; the sweeper re-enqueues lanes whose lease lapsed.
    dispatch_until = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run", "position"]
        constraints = [
            models.UniqueConstraint(fields=["run", "deployment"], name="runs_runlane_deployment_unique"),
            models.UniqueConstraint(fields=["run", "position"], name="runs_runlane_position_unique"),
            models.CheckConstraint(
                condition=Q(status__in=LaneStatus.values), name="runs_runlane_status_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.run_id} / {self.deployment_name}"


def protocol_item_id(run_id: Any, item_id: int) -> str:
    """An item's id in the agent protocol: a UUID derived from the run's UUID and the item's
    row id, the same for every attempt and retry, so nothing more is stored per item."""
    run = run_id if isinstance(run_id, uuid.UUID) else uuid.UUID(str(run_id))
    return str(uuid.uuid5(run, str(item_id)))


class RunItem(models.Model):
    # No single-column FK indexes: every write of an item rewrites all its index entries
    # (state changes are never HOT updates), so only the indexes below exist; (run, id)
    # serves run lookups and cascades, the case unique constraint serves the lane.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="items", db_index=False)
    lane = models.ForeignKey(RunLane, on_delete=models.CASCADE, related_name="items", db_index=False)
    # Denormalised from the lane: in-flight limits count claimed items per deployment. The
    # lane's PROTECT keeps a deployment with items; the database FK holds the rest.
    deployment = models.ForeignKey(Deployment, on_delete=models.DO_NOTHING, related_name="+", db_index=False)
    # Immutable pack rows; the run's PROTECT of its pack version keeps them.
    challenge = models.ForeignKey(
        "packs.Challenge", on_delete=models.DO_NOTHING, related_name="+", db_index=False
    )
    # Null in a zero-set run (the empty case).
    case = models.ForeignKey(
        "packs.Case", on_delete=models.DO_NOTHING, null=True, blank=True, related_name="+", db_index=False
    )
    challenge_key = models.CharField(max_length=200)
    case_key = models.CharField(max_length=200)
    position = models.PositiveIntegerField(default=0)  # input-set order
    repetition = models.PositiveSmallIntegerField(default=1)
    state = models.CharField(max_length=20, choices=ItemState.choices, default=ItemState.PENDING)
    claim_owner = models.CharField(max_length=64, blank=True, default="")
    claimed_at = models.DateTimeField(null=True, blank=True)
    claim_deadline = models.DateTimeField(null=True, blank=True)
    claims = models.PositiveSmallIntegerField(default=0)  # times claimed (bounds sweeper returns)
    attempt_count = models.PositiveSmallIntegerField(default=0)
    last_category = models.CharField(max_length=20, choices=AttemptCategoryChoice.choices, blank=True)
    # The current grade (revision scoring_revision); "" while ungraded or when no grade
    # exists (then last_category says why).
    status = models.CharField(max_length=20, choices=GradeStatus.choices, blank=True, default="")
    outcome_class = models.CharField(max_length=20, blank=True, default="")
    reason_code = models.CharField(max_length=100, blank=True, default="")
    score = models.FloatField(null=True, blank=True)
    # {"response": the agent-protocol response as received, "timing": {...}}: re-scoring
    # rebuilds the Evidence from it without calling the agent.
    evidence = models.JSONField(null=True, blank=True)
    grade = models.JSONField(null=True, blank=True)  # grading.json (grading.md §7)
    scoring_revision = models.PositiveIntegerField(default=0)
    latency_ms = models.FloatField(null=True, blank=True)
    input_tokens = models.BigIntegerField(null=True, blank=True)
    output_tokens = models.BigIntegerField(null=True, blank=True)
    cost_usd = models.FloatField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["lane", "challenge_key", "case_key", "repetition"], name="runs_runitem_case_unique"
            ),
            models.CheckConstraint(condition=Q(state__in=ItemState.values), name="runs_runitem_state_valid"),
        ]
        indexes = [
            # Claim candidates: a lane's pending items in order; never rescans finished rows.
            models.Index(fields=["lane", "id"], condition=Q(state="pending"), name="runs_runitem_pending"),
            # In-flight count per deployment, and the sweeper's expired claims.
            models.Index(
                fields=["deployment"], condition=Q(state="claimed"), name="runs_runitem_claimed_dep"
            ),
            models.Index(
                fields=["claim_deadline"], condition=Q(state="claimed"), name="runs_runitem_claimed_deadline"
            ),
            # Keyset case lists and filters.
            models.Index(fields=["run", "id"], name="runs_runitem_run_id"),
            models.Index(fields=["run", "status", "id"], name="runs_runitem_run_status"),
            models.Index(fields=["run", "lane", "id"], name="runs_runitem_run_lane"),
            models.Index(fields=["run", "challenge_key", "case_key"], name="runs_runitem_run_case"),
        ]

    def __str__(self) -> str:
        return f"{self.challenge_key}/{self.case_key} #{self.repetition}"

    @property
    def protocol_id(self) -> str:
        """The ``item_id`` agents receive (spec/agent-protocol.md)."""
        return protocol_item_id(self.run_id, self.pk)

    @property
    def display_status(self) -> str:
        """The grade status, else the last attempt's category, else ``pending``
        (interfaces.md §6 ``cases[].status``)."""
        if self.status:
            return self.status
        if self.state in (ItemState.PENDING, ItemState.CLAIMED):
            return "pending"
        return self.last_category or "pending"


class Attempt(models.Model):
    # Indexed by the (item, number) unique constraint.
    item = models.ForeignKey(RunItem, on_delete=models.CASCADE, related_name="attempts", db_index=False)
    number = models.PositiveSmallIntegerField()
    category = models.CharField(max_length=20, choices=AttemptCategoryChoice.choices)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error_code = models.CharField(max_length=100, blank=True, default="")
    error = models.TextField(blank=True, default="")
    latency_ms = models.FloatField(null=True, blank=True)
    body_excerpt = models.TextField(blank=True, default="")
    retry_after = models.FloatField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["item", "number"]
        constraints = [
            models.UniqueConstraint(fields=["item", "number"], name="runs_attempt_number_unique"),
        ]

    def __str__(self) -> str:
        return f"attempt {self.number} of item {self.item_id}: {self.category}"


class GradeRevision(models.Model):
    """Every grade an item received; a re-score adds a revision, old ones stay viewable."""

    # Indexed by the (item, revision) unique constraint.
    item = models.ForeignKey(RunItem, on_delete=models.CASCADE, related_name="revisions", db_index=False)
    revision = models.PositiveIntegerField()
    status = models.CharField(max_length=20, choices=GradeStatus.choices)
    outcome_class = models.CharField(max_length=20, blank=True, default="")
    score = models.FloatField(null=True, blank=True)
    grade = models.JSONField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["item", "revision"]
        constraints = [
            models.UniqueConstraint(fields=["item", "revision"], name="runs_graderevision_unique"),
        ]

    def __str__(self) -> str:
        return f"item {self.item_id} revision {self.revision}: {self.status}"


class Transition(models.Model):
    """A recorded state change of a run, a lane or (in bulk) items."""

    class Entity(models.TextChoices):
        RUN = "run", "run"
        LANE = "lane", "lane"
        ITEM = "item", "item"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="transitions")
    lane = models.ForeignKey(RunLane, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    item = models.ForeignKey(RunItem, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    entity = models.CharField(max_length=10, choices=Entity.choices)
    from_state = models.CharField(max_length=20, blank=True, default="")
    to_state = models.CharField(max_length=20)
    reason = models.CharField(max_length=500, blank=True, default="")
    count = models.PositiveIntegerField(default=1)  # items moved together (bulk item transitions)
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["run", "at", "id"]
        indexes = [models.Index(fields=["run", "at"], name="runs_transition_run_at")]

    def __str__(self) -> str:
        return f"{self.entity} {self.from_state or '-'} -> {self.to_state}"


class ComparisonStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    READY = "ready", "Ready"
    FAILED = "failed", "Failed"


class RunComparison(models.Model):
    """A stored run (or lane) comparison; the compare task fills ``result``."""

    workspace = models.ForeignKey("workspaces.Workspace", on_delete=models.CASCADE, related_name="+")
    baseline = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    candidate = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    baseline_lane = models.ForeignKey(
        RunLane, on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    candidate_lane = models.ForeignKey(
        RunLane, on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    # "<baseline_lane id or ''>:<candidate_lane id or ''>": unique with the two runs (NULLs
    # would be distinct in a unique constraint).
    lanes_key = models.CharField(max_length=50, default=":")
    status = models.CharField(
        max_length=20, choices=ComparisonStatus.choices, default=ComparisonStatus.PENDING
    )
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    computed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["baseline", "candidate", "lanes_key"], name="runs_runcomparison_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.baseline_id} vs {self.candidate_id} [{self.lanes_key}]"

    @staticmethod
    def key_for(baseline_lane: RunLane | None, candidate_lane: RunLane | None) -> str:
        return f"{baseline_lane.pk if baseline_lane else ''}:{candidate_lane.pk if candidate_lane else ''}"


class SweeperStatus(models.Model):
    """One row (name "runs"): when the recovery sweeper last ran and what it did."""

    name = models.CharField(max_length=50, primary_key=True)
    last_run_at = models.DateTimeField(null=True, blank=True)
    last_result = models.JSONField(default=dict, blank=True)

    def __str__(self) -> str:
        return f"{self.name} @ {self.last_run_at}"


# --- Result-page aggregates and stored comparison cases (helper PG) ------------------------
#
# The overview and compare pages never scan a run's items per request (ARCHITECTURE.md
# "Result pages never load a whole run"): what cannot come from RunLane counters is computed
# once by a task (runs.result_tasks, runs.compare_tasks) and read from these rows.


class RunResultSummary(models.Model):
    """Per-lane score histograms and per-expectation tallies (assertion health) of one run,
    computed once per scoring revision when the run is finished."""

    run = models.OneToOneField(Run, on_delete=models.CASCADE, primary_key=True, related_name="result_summary")
    scoring_revision = models.PositiveIntegerField(default=0)
    status = models.CharField(
        max_length=20, choices=ComparisonStatus.choices, default=ComparisonStatus.PENDING
    )
    # {lane_id: [10 counts]}: scores in [0, 0.1), ..., [0.9, 1.0] (runs.charts.score_bin).
    score_bins = models.JSONField(default=dict, blank=True)
    # [{"key", "kind", "lanes": {lane_id: {"PASSED", "FAILED", "other"}}, "discriminates"}]
    assertion_health = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True, default="")
    computed_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"summary of {self.run_id} r{self.scoring_revision}: {self.status}"


class ComparisonCase(models.Model):
    """One matched (or unmatched) case of a stored comparison, for keyset-paged lists."""

    comparison = models.ForeignKey(RunComparison, on_delete=models.CASCADE, related_name="cases")
    deployment = models.CharField(max_length=100)  # the lane pair, by deployment name
    change = models.CharField(max_length=20)  # grading.engine.compare.CLASSES
    challenge_key = models.CharField(max_length=200)
    case_key = models.CharField(max_length=200)
    baseline_status = models.CharField(max_length=20, blank=True, default="")
    candidate_status = models.CharField(max_length=20, blank=True, default="")
    baseline_score = models.FloatField(null=True, blank=True)
    candidate_score = models.FloatField(null=True, blank=True)
    score_delta = models.FloatField(null=True, blank=True)
    noisy = models.BooleanField(default=False)
    case_changed = models.BooleanField(default=False)
    # RunItem ids (first repetition) for links to the case pages; plain ids, no FK.
    baseline_item_id = models.BigIntegerField(null=True, blank=True)
    candidate_item_id = models.BigIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["comparison", "id"]
        indexes = [
            # The compare page's keyset lists: all cases, or one class (regressions only).
            models.Index(fields=["comparison", "id"], name="runs_cmpcase_cmp_id"),
            models.Index(fields=["comparison", "change", "id"], name="runs_cmpcase_cmp_change"),
        ]

    def __str__(self) -> str:
        return f"{self.challenge_key}/{self.case_key}: {self.change}"
