"""``pack_version_publish``: validate + store, atomically (pack-format §12).

1. Validate the bundle (400 ``invalid_challenge_pack`` with the validate body), then the
   rules that need the database: every value fits its column, and every ``artifact_id``
   names an artifact of this workspace. Their errors have the validator's shape, with the
   value's line and column.
2. Write the files of the bound zip members to storage at their content addresses, before
   any transaction: storage may be remote, and no network I/O happens inside
   ``transaction.atomic()``.
3. One transaction: verify the ``artifact_id``s again (they were checked before storing), lock
   or create the pack (workspace, slug), refuse a different name or family, check the
   version number, and insert the version with its challenges, input sets, cases and
   assets in bulk, and the artifact rows of the bound files that have none. Any error rolls
   everything back.
4. After a failure (or when the same bytes turned out to be published already), delete the
   files step 2 wrote that no committed artifact names; after a success, check that every
   new artifact's file is in place (``packs.services.artifacts`` says why both are needed).
"""

from __future__ import annotations

import functools
import hashlib
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from agentclash_site.workspaces.models import Workspace
from packs import bundle as pack_bundle
from packs.bundle import BundleReport, archive
from packs.bundle.issues import BundleIssue, Path, sort_issues
from packs.models import Artifact, Asset, Case, Challenge, InputSet, Pack, PackVersion
from packs.services.artifacts import (
    artifact_file_write,
    artifact_files_ensure,
    artifact_files_forget,
    artifact_new,
)

ZIP_MEDIA_TYPE = "application/zip"
YAML_MEDIA_TYPE = "application/yaml"
ARTIFACT_MESSAGE = "must reference an artifact in this workspace"


# --- results and errors --------------------------------------------------------------


@dataclass(frozen=True)
class PublishResult:
    pack: Pack
    version: PackVersion
    input_set_ids: dict[str, str]
    warnings: list[dict[str, Any]]
    already_published: bool

    @property
    def created(self) -> bool:
        return not self.already_published

    def to_dict(self) -> dict[str, Any]:
        """The document of spec/interfaces.md §4 (CLI) and of the API's 201/200 answers."""
        return {
            "pack_id": str(self.pack.public_id),
            "pack_version_id": str(self.version.public_id),
            "slug": self.pack.slug,
            "number": self.version.number,
            "input_set_ids": dict(self.input_set_ids),
            "warnings": list(self.warnings),
            "already_published": self.already_published,
        }


class PublishError(Exception):
    status_code = 400
    code = "error"

    def body(self) -> dict[str, Any]:
        raise NotImplementedError


class PackInvalid(PublishError):
    """The bundle does not validate: the validate body plus ``code``."""

    status_code = 400
    code = "invalid_challenge_pack"

    def __init__(self, report_body: dict[str, Any]) -> None:
        super().__init__("the challenge pack is invalid")
        self.report_body = report_body

    def body(self) -> dict[str, Any]:
        return {**self.report_body, "code": self.code}


class PublishConflict(PublishError):
    """409: the bundle is valid, but what is published disagrees. ``line``/``column`` are
    the position of the ``field``'s value in the bundle; the error object has no keys for
    them (spec/interfaces.md §2: ``{code, message, field?, choices?}`` exactly), so
    ``message`` ends with "(line L, column C)" when the position is known."""

    status_code = 409

    def __init__(
        self,
        code: str,
        message: str,
        *,
        field: str | None = None,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        if line is not None and column is not None:
            message = f"{message} (line {line}, column {column})"
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field
        self.line = line
        self.column = column

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.field:
            error["field"] = self.field
        return {"error": error}


# --- the plan: what the report says to insert -----------------------------------------


@dataclass
class _AssetPlan:
    where: Path  # in the manifest, e.g. ("version", "assets", 0)
    key: str
    path: str
    kind: str
    media_type: str
    artifact_id: uuid.UUID | None
    bound_path: str | None  # the zip member this asset binds to


@dataclass
class _CasePlan:
    challenge_key: str
    case_key: str
    item_key: str
    document: Any
    content_hash: str
    assets: list[_AssetPlan] = field(default_factory=list)


@dataclass
class _SetPlan:
    key: str
    name: str
    description: str
    cases: list[_CasePlan]


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _member_name(path: str) -> str | None:
    """The zip member an asset path binds to (pack-format §2.2); absolute paths never bind."""
    if archive.is_absolute(path):
        return None
    return archive.normalize_asset_path(path)


def _asset_plans(assets: Iterable[Any] | None, prefix: Path, files: dict[str, bytes]) -> list[_AssetPlan]:
    plans = []
    for index, asset in enumerate(assets or []):
        path = str(_get(asset, "path") or "")
        raw_id = _get(asset, "artifact_id")
        member = _member_name(path)
        plans.append(
            _AssetPlan(
                where=(*prefix, index),
                key=str(_get(asset, "key") or ""),
                path=path,
                kind=str(_get(asset, "kind") or ""),
                media_type=str(_get(asset, "media_type") or ""),
                artifact_id=uuid.UUID(str(raw_id)) if raw_id else None,
                bound_path=member if member is not None and member in files else None,
            )
        )
    return plans


def _plan(
    report: BundleReport, files: dict[str, bytes]
) -> tuple[dict[str, Any], list[_SetPlan], list[_AssetPlan]]:
    """What to insert, from the report: the manifest, each set's cases in the stored form
    of pack-format §6 (``case_documents()``), and every asset with what it binds to."""
    manifest: dict[str, Any] = report.manifest or {}
    documents = report.case_documents()
    version_assets = _asset_plans(manifest["version"].get("assets"), ("version", "assets"), files)
    sets: list[_SetPlan] = []
    for s_index, input_set in enumerate(manifest.get("input_sets") or []):
        docs = documents[input_set["key"]]
        cases = [
            _CasePlan(
                challenge_key=doc.challenge_key,
                case_key=doc.case_key,
                item_key=doc.item_key,  # the effective key fills the item-key column (§6)
                document=doc.document,
                content_hash=doc.content_hash,
                assets=_asset_plans(
                    case.get("assets"), ("input_sets", s_index, "cases", c_index, "assets"), files
                ),
            )
            for c_index, (case, doc) in enumerate(zip(input_set.get("cases") or [], docs, strict=True))
        ]
        sets.append(
            _SetPlan(
                key=input_set["key"],
                name=input_set.get("name") or input_set["key"],
                description=input_set.get("description") or "",
                cases=cases,
            )
        )
    return manifest, sets, version_assets


def _all_assets(
    manifest: dict[str, Any], sets: list[_SetPlan], version_assets: list[_AssetPlan], files: dict[str, bytes]
) -> Iterator[_AssetPlan]:
    yield from version_assets
    for c_index, challenge in enumerate(manifest.get("challenges") or []):
        yield from _asset_plans(challenge.get("assets"), ("challenges", c_index, "assets"), files)
    for input_set in sets:
        for case in input_set.cases:
            yield from case.assets


# --- the service ------------------------------------------------------------------------


def pack_version_publish(
    *, workspace: Workspace, data: bytes, strict: bool = False, user: Any = None, filename: str | None = None
) -> PublishResult:
    """Validate ``data`` (a YAML document or a zip bundle) and publish it as a new version.

    Raises :class:`PackInvalid` (400) or :class:`PublishConflict` (409). Publishing the very
    same bytes again returns the stored version with ``already_published`` set.
    """
    report = pack_bundle.validate_bundle(data, strict=strict, filename=filename)
    body = report.to_body()
    if not report.valid:
        raise PackInvalid(body)
    files: dict[str, bytes] = dict(report.files)
    manifest, sets, version_assets = _plan(report, files)
    plan = _Publish(
        workspace=workspace,
        data=data,
        report=report,
        body=body,
        manifest=manifest,
        sets=sets,
        version_assets=version_assets,
        assets=list(_all_assets(manifest, sets, version_assets, files)),
        files=files,
        user=user,
    )
    # Before anything is stored: artifact ids that name no artifact of this workspace.
    # (Values too long for their columns are the validator's, ``packs.bundle.limits``.)
    _refuse(_artifact_lookup(workspace=workspace, assets=plan.assets, report=report)[1], body)
    # Outside the transaction: artifact storage may be remote (S3).
    staged = _stage_files(workspace=workspace, files=files, user=user)
    try:
        result = _publish(plan, staged)
    except BaseException:
        # Nothing of this publish is committed: its rows rolled back, and its files go.
        artifact_files_forget(workspace=workspace, written=staged.written)
        raise
    if result.created:
        artifact_files_ensure(staged.new_files())
    else:
        artifact_files_forget(workspace=workspace, written=staged.written)
    return result


@dataclass(frozen=True)
class _Publish:
    """What one publish works from: the validated report and the rows it plans to insert."""

    workspace: Workspace
    data: bytes
    report: BundleReport
    body: dict[str, Any]  # the validate body (its warnings are the version's)
    manifest: dict[str, Any]
    sets: list[_SetPlan]
    version_assets: list[_AssetPlan]
    assets: list[_AssetPlan]  # every asset of the bundle, version_assets among them
    files: dict[str, bytes]  # the zip's members (empty for a YAML bundle)
    user: Any

    @functools.cached_property
    def content_hash(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @property
    def meta(self) -> Any:
        return self.report.pack

    @property
    def warnings(self) -> list[Any]:
        return self.body["warnings"]


@dataclass
class _Staged:
    """The bound zip files of a publish, written to storage before its transaction.

    ``rows``: an unsaved artifact per sha256 that had no row when the files were written
    (the transaction inserts them); ``paths``: zip member -> sha256; ``written``: the files
    this publish wrote, ``{name: bytes}`` (the only ones a failure may delete)."""

    paths: dict[str, str]
    rows: dict[str, Artifact]
    data: dict[str, bytes]
    written: dict[str, bytes]

    def new_files(self) -> list[tuple[str, bytes]]:
        return [(row.file.name, self.data[digest]) for digest, row in sorted(self.rows.items())]


def _stage_files(*, workspace: Workspace, files: dict[str, bytes], user: Any) -> _Staged:
    paths = {path: hashlib.sha256(content).hexdigest() for path, content in files.items()}
    existing = set(
        Artifact.objects.filter(workspace=workspace, sha256__in=set(paths.values())).values_list(
            "sha256", flat=True
        )
    )
    staged = _Staged(paths=paths, rows={}, data={}, written={})
    try:
        for path, content in sorted(files.items()):
            digest = paths[path]
            if digest in existing or digest in staged.rows:
                continue
            row = artifact_new(workspace=workspace, data=content, filename=path.rsplit("/", 1)[-1], user=user)
            staged.rows[digest], staged.data[digest] = row, content
            if artifact_file_write(name=row.file.name, data=content):
                staged.written[row.file.name] = content
    except BaseException:
        artifact_files_forget(workspace=workspace, written=staged.written)
        raise
    return staged


def _bind_artifacts(*, workspace: Workspace, staged: _Staged) -> dict[str, Artifact]:
    """Under the transaction: the artifact of each bound zip member, inserting the rows the
    staged files lack. A concurrent insert of the same bytes holds the unique index until it
    ends: its row is used if it commits, ours is inserted if it rolls back.

    The rows are inserted here rather than with the files, so a publish that fails leaves no
    row to delete: a row committed before the transaction could already have been handed to
    a concurrent publish or upload (``artifact_store`` returns the row it finds), and no
    check at clean-up time could tell that it is in use."""
    if not staged.paths:
        return {}
    # In sha256 order: two publishes inserting the same new files wait on each other's
    # unique-index entries in the same order, never in a cycle (a deadlock).
    rows = [row for _digest, row in sorted(staged.rows.items())]
    Artifact.objects.bulk_create(rows, ignore_conflicts=True)
    by_digest = {
        a.sha256: a
        for a in Artifact.objects.filter(workspace=workspace, sha256__in=set(staged.paths.values()))
    }
    return {path: by_digest[digest] for path, digest in staged.paths.items()}


def _publish(plan: _Publish, staged: _Staged) -> PublishResult:
    try:
        with transaction.atomic():
            return _publish_locked(plan, staged)
    except IntegrityError:
        # A concurrent publish of the same (pack, number) committed first; the lock on the
        # pack row makes this rare (only the pack-creation race can reach it). Judged by
        # what is stored now, so it reads the same on PostgreSQL and SQLite.
        outcome = _after_race(plan)
        if outcome is None:
            raise
        return outcome


def _after_race(plan: _Publish) -> PublishResult | None:
    """The outcome once the winner of a race committed; None when no version explains it."""
    number = int(plan.manifest["version"]["number"])
    slug = _get(plan.meta, "slug")
    version = (
        PackVersion.objects.select_related("pack")
        .filter(pack__workspace=plan.workspace, pack__slug=slug, number=number)
        .first()
    )
    if version is None:
        return None
    if version.content_hash == plan.content_hash:
        return _already(version, plan.warnings)
    raise _version_exists(slug, number, plan.report)


def _conflict(code: str, message: str, path: Path, report: BundleReport) -> PublishConflict:
    issue = report.issue_at(path, message)
    return PublishConflict(code, message, field=issue.field, line=issue.line, column=issue.column)


def _version_exists(slug: str, number: int, report: BundleReport) -> PublishConflict:
    return _conflict(
        "challenge_pack_version_exists",
        f"version {number} of pack {slug!r} is already published with different content; "
        "publish a new version number",
        ("version", "number"),
        report,
    )


def _already(version: PackVersion, warnings: list[Any]) -> PublishResult:
    ids = {s.key: str(s.public_id) for s in version.input_sets.order_by("position")}
    return PublishResult(version.pack, version, ids, warnings, already_published=True)


def _refuse(issues: list[BundleIssue], body: dict[str, Any]) -> None:
    """Raise :class:`PackInvalid` with the validate body of ``issues``, if there are any."""
    if issues:
        errors = [issue.to_dict() for issue in sort_issues(issues)]
        raise PackInvalid({"valid": False, "errors": errors, "warnings": body["warnings"]})


def _artifact_lookup(
    *, workspace: Workspace, assets: list[_AssetPlan], report: BundleReport
) -> tuple[dict[uuid.UUID, Artifact], list[BundleIssue]]:
    """The artifacts the ``artifact_id``s name, and an issue (at the ``artifact_id`` value)
    for each id that names no artifact of this workspace: unknown and foreign ids get the
    same error, so another workspace's artifacts are never revealed."""
    named = [a for a in assets if a.artifact_id is not None and a.bound_path is None]
    wanted = {a.artifact_id for a in named}
    found = {a.public_id: a for a in Artifact.objects.filter(workspace=workspace, public_id__in=wanted)}
    issues = [
        report.issue_at((*a.where, "artifact_id"), ARTIFACT_MESSAGE)
        for a in named
        if a.artifact_id not in found
    ]
    return found, issues


def _check_artifact_ids(
    *, workspace: Workspace, assets: list[_AssetPlan], body: dict[str, Any], report: BundleReport
) -> dict[uuid.UUID, Artifact]:
    """Under the transaction, again: the ids were checked before the bound files were stored."""
    found, issues = _artifact_lookup(workspace=workspace, assets=assets, report=report)
    _refuse(issues, body)
    return found


def _lock_or_create_pack(*, workspace: Workspace, meta: Any) -> tuple[Pack, bool]:
    slug = _get(meta, "slug")
    pack = Pack.objects.select_for_update().filter(workspace=workspace, slug=slug).first()
    if pack is not None:
        return pack, False
    try:
        with transaction.atomic():  # a savepoint: losing the creation race must not poison the outer one
            pack = Pack.objects.create(
                workspace=workspace,
                slug=slug,
                name=_get(meta, "name"),
                family=_get(meta, "family"),
                description=_get(meta, "description") or "",
            )
        return pack, True
    except IntegrityError:
        # Another publish created it first and has committed (the unique index waited for it).
        return Pack.objects.select_for_update().get(workspace=workspace, slug=slug), False


def _publish_locked(plan: _Publish, staged: _Staged) -> PublishResult:
    workspace, manifest, meta, report, warnings = (
        plan.workspace,
        plan.manifest,
        plan.meta,
        plan.report,
        plan.warnings,
    )
    by_id = _check_artifact_ids(workspace=workspace, assets=plan.assets, body=plan.body, report=report)
    pack, created = _lock_or_create_pack(workspace=workspace, meta=meta)
    number = int(manifest["version"]["number"])
    existing = PackVersion.objects.filter(pack=pack, number=number).first()
    if existing is not None and existing.content_hash == plan.content_hash:
        return _already(existing, warnings)
    if not created and (pack.name != _get(meta, "name") or pack.family != _get(meta, "family")):
        raise _conflict(
            "challenge_pack_metadata_conflict",
            f"pack {pack.slug!r} is published as {pack.name!r} (family {pack.family!r}); "
            "a new version must keep its name and family",
            ("pack", "name" if pack.name != _get(meta, "name") else "family"),
            report,
        )
    if existing is not None:
        raise _version_exists(pack.slug, number, report)
    bound = _bind_artifacts(workspace=workspace, staged=staged)
    version = PackVersion.objects.create(
        pack=pack,
        number=number,
        manifest=manifest,
        source=plan.data,
        source_media_type=ZIP_MEDIA_TYPE if report.is_zip else YAML_MEDIA_TYPE,
        content_hash=plan.content_hash,
        execution_mode=_get(manifest["version"], "execution_mode") or "native",
        published_by=plan.user if getattr(plan.user, "is_authenticated", False) else None,
        warnings=warnings,
    )
    challenges = _insert_challenges(version=version, manifest=manifest)
    input_sets, cases = _insert_sets_and_cases(version=version, sets=plan.sets, challenges=challenges)
    _insert_assets(
        version=version,
        manifest=manifest,
        sets=plan.sets,
        version_assets=plan.version_assets,
        challenges=challenges,
        cases=cases,
        bound=bound,
        by_id=by_id,
        files=plan.files,
    )
    if not created:
        # The pack reads as its highest version: back-filling an older number (publishing 2
        # after 5) must not put version 2's description back on the pack.
        newest = not PackVersion.objects.filter(pack=pack, number__gt=number).exists()
        fields: dict[str, Any] = {"updated_at": timezone.now()}
        if newest:
            fields["description"] = _get(meta, "description") or ""
        Pack.objects.filter(pk=pack.pk).update(**fields)
    ids = {s.key: str(s.public_id) for s in input_sets}
    return PublishResult(pack, version, ids, warnings, already_published=False)


def _insert_challenges(*, version: PackVersion, manifest: dict[str, Any]) -> dict[str, Challenge]:
    rows = []
    for position, item in enumerate(manifest.get("challenges") or []):
        rows.append(
            Challenge(
                version=version,
                key=item["key"],
                title=item.get("title") or "",
                category=item.get("category") or "",
                difficulty=item.get("difficulty") or "",
                instructions=item.get("instructions") or "",
                definition=item.get("definition") or {},
                position=position,
            )
        )
    return {c.key: c for c in Challenge.objects.bulk_create(rows)}


def _insert_sets_and_cases(
    *, version: PackVersion, sets: list[_SetPlan], challenges: dict[str, Challenge]
) -> tuple[list[InputSet], list[list[Case]]]:
    set_rows = []
    for position, plan in enumerate(sets):
        challenge_key = next((c.challenge_key for c in plan.cases if c.challenge_key), "")
        set_rows.append(
            InputSet(
                version=version,
                key=plan.key,
                name=plan.name,
                description=plan.description,
                challenge=challenges.get(challenge_key),
                challenge_key=challenge_key,
                position=position,
            )
        )
    input_sets = InputSet.objects.bulk_create(set_rows)
    case_rows = []
    for input_set, plan in zip(input_sets, sets, strict=True):
        for position, case in enumerate(plan.cases):
            case_rows.append(
                Case(
                    input_set=input_set,
                    challenge=challenges[case.challenge_key],
                    case_key=case.case_key,
                    item_key=case.item_key,
                    position=position,
                    document=case.document,
                    content_hash=case.content_hash,
                )
            )
    created = Case.objects.bulk_create(case_rows)
    grouped: list[list[Case]] = []
    cursor = 0
    for plan in sets:
        grouped.append(created[cursor : cursor + len(plan.cases)])
        cursor += len(plan.cases)
    return input_sets, grouped


def _insert_assets(
    *,
    version: PackVersion,
    manifest: dict[str, Any],
    sets: list[_SetPlan],
    version_assets: list[_AssetPlan],
    challenges: dict[str, Challenge],
    cases: list[list[Case]],
    bound: dict[str, Artifact],
    by_id: dict[uuid.UUID, Artifact],
    files: dict[str, bytes],
) -> list[Asset]:
    rows: list[Asset] = []

    def add(
        plan: _AssetPlan, scope: str, *, challenge: Challenge | None = None, case: Case | None = None
    ) -> None:
        artifact = bound.get(plan.bound_path) if plan.bound_path else by_id.get(plan.artifact_id)  # type: ignore[arg-type]
        rows.append(
            Asset(
                version=version,
                scope=scope,
                challenge=challenge,
                case=case,
                key=plan.key,
                path=plan.path,
                kind=plan.kind,
                media_type=plan.media_type or (artifact.media_type if artifact else ""),
                sha256=artifact.sha256 if artifact else "",
                size=artifact.size if artifact else None,
                artifact=artifact,
                file=artifact.file.name if artifact else "",
            )
        )

    for plan in version_assets:
        add(plan, Asset.Scope.VERSION)
    for c_index, item in enumerate(manifest.get("challenges") or []):
        for plan in _asset_plans(item.get("assets"), ("challenges", c_index, "assets"), files):
            add(plan, Asset.Scope.CHALLENGE, challenge=challenges[item["key"]])
    for set_plan, case_rows in zip(sets, cases, strict=True):
        for case_plan, case in zip(set_plan.cases, case_rows, strict=True):
            for plan in case_plan.assets:
                add(plan, Asset.Scope.CASE, case=case)
    return Asset.objects.bulk_create(rows)
