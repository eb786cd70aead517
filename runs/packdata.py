"""What a run needs of its pack version: small shared data per process and version, and
each case built when a dispatcher claims it.

Per process, version and input set (``version_data``, an LRU of ``_CACHE_SIZE``), only what
is shared and small is kept: the evaluation spec, challenge metadata, the version's and
challenges' asset ids, and a case-less typed bundle read back from the stored manifest
(``packs.bundle.stored.manifest_bundle``; with the zip's files for a zip version). The whole
stored source is never validated again here: publishing did that.

A case's ``(CaseDef, GradeContext)`` is built from its stored ``packs.models.Case`` row with
the bundle's own conversion (``packs.bundle.stored.stored_case``, then ``packs.bundle.report``
``case_def`` and ``BundleReport.grade_context``, as ``BundleReport.grading_cases`` and the
offline ``grade`` command do), and kept in one per-process LRU of ``CASE_CACHE_SIZE`` cases
across versions. ``VersionData.load(keys)`` fetches a claimed batch's missing cases in one
query (two when the version has case assets); ``case()`` of a case that is not cached
fetches that one row. ``iter_cases()`` streams every case of the input set without caching.
Executors get ``ChallengeInfo`` / ``CaseInfo`` built from those, with signed URLs for
stored assets.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from django.conf import settings

from agentclash_site.lib.signing import signed_asset_url
from grading.engine.types import MISSING, CaseDef, GradeContext
from runs.executors.base import NO_VALUE, AssetLink, CaseInfo, CaseInputInfo, ChallengeInfo

_CACHE_SIZE = 16
# Cases kept per process, all versions together: more than a dispatcher has in flight (a
# deployment's max_in_flight), so a claimed case is still cached when its answer is graded.
CASE_CACHE_SIZE = 4096
_STREAM_CHUNK = 500

_cache: OrderedDict[tuple[int, str, str | None], VersionData] = OrderedDict()
_lock = threading.Lock()
# (version cache key, challenge key, case key) -> the built case
_cases: OrderedDict[tuple[tuple[int, str, str | None], str, str], _CaseEntry] = OrderedDict()
_cases_lock = threading.Lock()

CaseKey = tuple[str, str]  # (challenge key, case key)


class PackDataError(Exception):
    """The stored pack version cannot be read (should not happen for a published one)."""


@dataclass(frozen=True, slots=True)
class StoredAsset:
    """A published asset as an agent gets it: its stored row's path, media type (the
    artifact's when the pack named none) and whether a file is stored (a signed URL)."""

    path: str
    media_type: str
    public_id: str
    has_file: bool

    def link(self, key: str, base: str) -> AssetLink:
        url = signed_asset_url(self.public_id, base_url=base) if self.has_file else ""
        return AssetLink(key=key, path=self.path, media_type=self.media_type, url=url)


@dataclass(frozen=True, slots=True)
class _CaseEntry:
    case: CaseDef
    context: GradeContext
    assets: Mapping[str, StoredAsset]  # case asset key -> its stored row


_NO_ASSETS: Mapping[str, StoredAsset] = MappingProxyType({})  # shared by the cases without assets


@dataclass
class VersionData:
    pack_slug: str
    pack_number: int
    execution_mode: str
    spec: Any  # grading.engine.spec.EvaluationSpec
    challenges: dict[str, dict[str, str]]
    # challenge key -> {asset key -> row} (challenge scope); asset key -> row (version scope)
    challenge_assets: dict[str, dict[str, StoredAsset]] = field(default_factory=dict)
    version_assets: dict[str, StoredAsset] = field(default_factory=dict)
    # How cases are read: the version cache key, the input set's id (None: the zero-set run,
    # whose empty cases are ``empty_cases``), the case-less report, whether cases have assets.
    cache_key: tuple[int, str, str | None] = (0, "", None)
    input_set_id: int | None = None
    report: Any = None  # packs.bundle.BundleReport without input sets
    has_case_assets: bool = False
    empty_cases: dict[CaseKey, tuple[CaseDef, GradeContext]] = field(default_factory=dict)

    # -- cases ------------------------------------------------------------------------
    def case(self, challenge_key: str, case_key: str) -> tuple[CaseDef, GradeContext]:
        entry = self._entry(challenge_key, case_key)
        return entry.case, entry.context

    def load(self, keys: Iterable[CaseKey]) -> None:
        """Build and cache the cases of ``keys`` that are not cached, in one query (the
        cases of a claimed batch, before their requests are built)."""
        if self.input_set_id is None:
            return
        with _cases_lock:
            missing = {k for k in keys if (self.cache_key, *k) not in _cases}
        if missing:
            self._store(self._fetch(missing))

    def iter_cases(self) -> Iterator[tuple[CaseDef, GradeContext]]:
        """Every case of the input set in authored order (streamed, not cached)."""
        if self.input_set_id is None:
            yield from self.empty_cases.values()
            return
        from packs.models import Case

        rows = (
            Case.objects.filter(input_set_id=self.input_set_id)
            .order_by("position")
            .values_list("id", "challenge__key", "case_key", "document", "content_hash")
        )
        for chunk in chunked(rows.iterator(chunk_size=_STREAM_CHUNK), _STREAM_CHUNK):
            assets = self._case_assets([row[0] for row in chunk])
            for row in chunk:
                entry = self._build_case(row, assets.get(row[0], _NO_ASSETS))
                yield entry.case, entry.context

    def _entry(self, challenge_key: str, case_key: str) -> _CaseEntry:
        if self.input_set_id is None:
            pair = self.empty_cases.get((challenge_key, case_key))
            if pair is None:
                raise PackDataError(f"case {challenge_key}/{case_key} is not in the pack version")
            return _CaseEntry(pair[0], pair[1], _NO_ASSETS)
        key = (self.cache_key, challenge_key, case_key)
        with _cases_lock:
            hit = _cases.get(key)
            if hit is not None:
                _cases.move_to_end(key)
                return hit
        built = self._fetch({(challenge_key, case_key)})
        if not built:
            raise PackDataError(f"case {challenge_key}/{case_key} is not in the pack version")
        self._store(built)
        return built[(challenge_key, case_key)]

    def _fetch(self, keys: set[CaseKey]) -> dict[CaseKey, _CaseEntry]:
        from packs.models import Case

        rows = [
            row
            for row in Case.objects.filter(
                input_set_id=self.input_set_id, case_key__in={case_key for _, case_key in keys}
            ).values_list("id", "challenge__key", "case_key", "document", "content_hash")
            if (row[1], row[2]) in keys
        ]
        assets = self._case_assets([row[0] for row in rows])
        return {(row[1], row[2]): self._build_case(row, assets.get(row[0], _NO_ASSETS)) for row in rows}

    def _case_assets(self, case_ids: list[int]) -> dict[int, dict[str, StoredAsset]]:
        if not self.has_case_assets or not case_ids:
            return {}
        from packs.models import Asset

        out: dict[int, dict[str, StoredAsset]] = {}
        rows = Asset.objects.filter(scope=Asset.Scope.CASE, case_id__in=case_ids).values_list(
            "case_id", *_ASSET_COLUMNS
        )
        for case_id, *columns in rows:
            key, stored = _stored_asset(columns)
            out.setdefault(case_id, {})[key] = stored
        return out

    def _build_case(self, row: tuple[Any, ...], asset_ids: Mapping[str, StoredAsset]) -> _CaseEntry:
        from packs.bundle.report import case_def
        from packs.bundle.stored import StoredFormError, stored_case

        _id, challenge_key, case_key, document, content = row
        try:
            bundle_case = stored_case(challenge_key, case_key, document)
        except StoredFormError as exc:
            raise PackDataError(str(exc)) from exc
        case = case_def(bundle_case, self.report.files, content=content)
        return _CaseEntry(case, self.report.grade_context(case), asset_ids)

    def _store(self, built: dict[CaseKey, _CaseEntry]) -> None:
        with _cases_lock:
            for (challenge_key, case_key), entry in built.items():
                key = (self.cache_key, challenge_key, case_key)
                _cases[key] = entry
                _cases.move_to_end(key)
            while len(_cases) > CASE_CACHE_SIZE:
                _cases.popitem(last=False)

    # -- what executors see -----------------------------------------------------------
    def challenge_info(self, case: CaseDef, context: GradeContext) -> ChallengeInfo:
        meta = self.challenges.get(case.challenge_key, {})
        return ChallengeInfo(
            key=case.challenge_key,
            title=meta.get("title", ""),
            category=meta.get("category", ""),
            difficulty=meta.get("difficulty", ""),
            instructions=context.rendered_instructions,
        )

    def case_info(self, case: CaseDef, context: GradeContext) -> CaseInfo:
        """What the agent gets of a case. Its assets: the case's own, its challenge's, and
        the version assets the challenge (``artifact_refs``) and the case (``artifacts``, an
        input's ``artifact_key``) name, each once by key, nearest scope first; never the
        assets only an expectation names (``source: artifact:``: that would send the answer).
        Each with its declared path and media type, and a signed URL when a file is stored."""
        inputs = tuple(
            CaseInputInfo(
                key=i.key,
                kind=i.kind,
                value=NO_VALUE if i.value is MISSING else i.value,
                artifact_key=i.artifact_key,
                path=i.path,
            )
            for i in case.inputs
        )
        base = settings.PUBLIC_BASE_URL
        visible: dict[str, StoredAsset] = {}
        if case.assets:
            visible.update(self._entry(case.challenge_key, case.case_key).assets)
        for key, stored in self.challenge_assets.get(case.challenge_key, {}).items():
            visible.setdefault(key, stored)
        named = [
            *context.challenge_artifact_keys,
            *case.artifact_keys,
            *(i.artifact_key for i in case.inputs if i.artifact_key),
        ]
        for key in named:
            stored = self.version_assets.get(key)
            if stored is not None:
                visible.setdefault(key, stored)
        links = tuple(stored.link(key, base) for key, stored in visible.items())
        return CaseInfo(key=case.case_key, payload=dict(case.payload), inputs=inputs, assets=links)


_ASSET_COLUMNS = ("key", "path", "media_type", "public_id", "file")


def _stored_asset(columns: Iterable[Any]) -> tuple[str, StoredAsset]:
    key, path, media_type, public_id, file = columns
    return key, StoredAsset(path=path, media_type=media_type, public_id=str(public_id), has_file=bool(file))


def chunked(rows: Iterable[Any], size: int) -> Iterator[list[Any]]:
    """Lists of up to ``size`` items of ``rows``, in order (``itertools.batched`` from 3.12)."""
    chunk: list[Any] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def version_data(pack_version: Any, input_set_key: str | None) -> VersionData:
    """The (cached) grading and execution data of one input set of a published version."""
    # The content hash too: SQLite may reuse the id of a deleted version.
    cache_key = (pack_version.pk, pack_version.content_hash, input_set_key)
    with _lock:
        hit = _cache.get(cache_key)
        if hit is not None:
            _cache.move_to_end(cache_key)
            return hit
    data = _build(pack_version, input_set_key, cache_key)
    with _lock:
        _cache[cache_key] = data
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return data


def _build(
    pack_version: Any, input_set_key: str | None, cache_key: tuple[int, str, str | None]
) -> VersionData:
    from packs.bundle.archive import read_zip
    from packs.bundle.report import BundleReport
    from packs.bundle.stored import MANIFEST_MEMBERS, StoredFormError, manifest_bundle
    from packs.models import Asset, InputSet, PackVersion

    if not isinstance(pack_version, PackVersion):
        raise TypeError("version_data needs a PackVersion")
    # Only the members a run needs, never the manifest's input sets (every case again).
    values = (
        PackVersion.objects.filter(pk=pack_version.pk)
        .values_list(*(f"manifest__{name}" for name in MANIFEST_MEMBERS))
        .first()
    )
    if values is None:
        raise PackDataError(f"pack version {pack_version} does not exist any more")
    try:
        bundle = manifest_bundle(dict(zip(MANIFEST_MEMBERS, values, strict=True)))
    except StoredFormError as exc:
        raise PackDataError(f"pack version {pack_version}: {exc}") from exc
    files: dict[str, bytes] = {}
    if pack_version.is_zip:
        source = PackVersion.objects.filter(pk=pack_version.pk).values_list("source", flat=True).get()
        unpacked, issues = read_zip(bytes(source))
        if unpacked is None:
            raise PackDataError(
                f"pack version {pack_version}: the stored zip does not read back ({issues[0]})"
            )
        files = unpacked.files
    report = BundleReport(valid=True, bundle=bundle, files=files, is_zip=pack_version.is_zip)
    input_set_id: int | None = None
    empty: dict[CaseKey, tuple[CaseDef, GradeContext]] = {}
    if input_set_key is None:
        for case in report.case_defs(None):
            empty[(case.challenge_key, case.case_key)] = (case, report.grade_context(case))
    else:
        input_set_id = (
            InputSet.objects.filter(version=pack_version, key=input_set_key)
            .values_list("id", flat=True)
            .first()
        )
        if input_set_id is None:
            raise PackDataError(f"pack version {pack_version} has no input set {input_set_key!r}")
    challenges = {
        c.key: {"title": c.title or "", "category": c.category or "", "difficulty": str(c.difficulty or "")}
        for c in bundle.challenges
    }
    challenge_assets: dict[str, dict[str, StoredAsset]] = {}
    version_assets: dict[str, StoredAsset] = {}
    for scope, ch_key, *columns in (
        Asset.objects.filter(version=pack_version)
        .exclude(scope=Asset.Scope.CASE)
        .values_list("scope", "challenge__key", *_ASSET_COLUMNS)
    ):
        key, stored = _stored_asset(columns)
        if scope == Asset.Scope.VERSION:
            version_assets[key] = stored
        else:
            challenge_assets.setdefault(ch_key, {})[key] = stored
    has_case_assets = (
        input_set_id is not None
        and Asset.objects.filter(scope=Asset.Scope.CASE, case__input_set_id=input_set_id).exists()
    )
    return VersionData(
        pack_slug=pack_version.pack.slug,
        pack_number=pack_version.number,
        execution_mode=bundle.version.execution_mode,
        spec=bundle.version.evaluation_spec,
        challenges=challenges,
        challenge_assets=challenge_assets,
        version_assets=version_assets,
        cache_key=cache_key,
        input_set_id=input_set_id,
        report=report,
        has_case_assets=has_case_assets,
        empty_cases=empty,
    )


def cached_case_count() -> int:
    """How many built cases this process holds (at most ``CASE_CACHE_SIZE``)."""
    with _cases_lock:
        return len(_cases)


def clear_cache() -> None:
    with _lock:
        _cache.clear()
    with _cases_lock:
        _cases.clear()
