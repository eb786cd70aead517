"""What a run needs of its pack version, built once per process and version.

The grading engine's typed cases come from the same conversion the offline ``grade``
command uses (``packs.bundle`` ``BundleReport.grading_cases``): the version's stored source
is validated once and its cases become ``(CaseDef, GradeContext)`` pairs. Executors get
``ChallengeInfo`` / ``CaseInfo`` built from those, with signed URLs for stored assets.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from agentclash_site.lib.signing import signed_asset_url
from grading.engine.types import MISSING, CaseDef, GradeContext
from packs.bundle import validate_bundle
from runs.executors.base import NO_VALUE, AssetLink, CaseInfo, CaseInputInfo, ChallengeInfo

_CACHE_SIZE = 16
_cache: OrderedDict[tuple[int, str, str | None], VersionData] = OrderedDict()
_lock = threading.Lock()


class PackDataError(Exception):
    """The stored pack version no longer validates (should not happen for a published one)."""


@dataclass
class VersionData:
    pack_slug: str
    pack_number: int
    execution_mode: str
    spec: Any  # grading.engine.spec.EvaluationSpec
    cases: dict[tuple[str, str], tuple[CaseDef, GradeContext]]
    challenges: dict[str, dict[str, str]]
    # (challenge_key, case_key or None for challenge scope, asset key) -> asset public id
    asset_ids: dict[tuple[str, str | None, str], str] = field(default_factory=dict)
    version_asset_ids: dict[str, str] = field(default_factory=dict)

    def case(self, challenge_key: str, case_key: str) -> tuple[CaseDef, GradeContext]:
        try:
            return self.cases[(challenge_key, case_key)]
        except KeyError:
            raise PackDataError(f"case {challenge_key}/{case_key} is not in the pack version") from None

    def challenge_info(self, case: CaseDef, context: GradeContext) -> ChallengeInfo:
        meta = self.challenges.get(case.challenge_key, {})
        return ChallengeInfo(
            key=case.challenge_key,
            title=meta.get("title", ""),
            category=meta.get("category", ""),
            difficulty=meta.get("difficulty", ""),
            instructions=context.rendered_instructions,
        )

    def case_info(self, case: CaseDef) -> CaseInfo:
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
        links: list[AssetLink] = []
        base = settings.PUBLIC_BASE_URL
        for ref in case.assets:
            public_id = self.asset_ids.get((case.challenge_key, case.case_key, ref.key))
            links.append(self._link(ref, public_id, base))
        for key in case.artifact_keys:
            public_id = self.version_asset_ids.get(key)
            if public_id is not None:
                ref = next((r for r in case.assets if r.key == key), None)
                links.append(
                    AssetLink(key=key, path=ref.path if ref else key, url=self._url(public_id, base))
                )
        return CaseInfo(key=case.case_key, payload=dict(case.payload), inputs=inputs, assets=tuple(links))

    @staticmethod
    def _url(public_id: str | None, base: str) -> str:
        return signed_asset_url(public_id, base_url=base) if public_id else ""

    def _link(self, ref: Any, public_id: str | None, base: str) -> AssetLink:
        return AssetLink(
            key=ref.key,
            path=ref.path,
            media_type=ref.media_type,
            url=self._url(public_id, base) if ref.has_file else "",
        )


def version_data(pack_version: Any, input_set_key: str | None) -> VersionData:
    """The (cached) grading and execution data of one input set of a published version."""
    # The content hash too: SQLite may reuse the id of a deleted version.
    cache_key = (pack_version.pk, pack_version.content_hash, input_set_key)
    with _lock:
        hit = _cache.get(cache_key)
        if hit is not None:
            _cache.move_to_end(cache_key)
            return hit
    data = _build(pack_version, input_set_key)
    with _lock:
        _cache[cache_key] = data
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return data


def _build(pack_version: Any, input_set_key: str | None) -> VersionData:
    from packs.models import Asset, PackVersion

    if not isinstance(pack_version, PackVersion):
        raise TypeError("version_data needs a PackVersion")
    source = bytes(pack_version.source)
    report = validate_bundle(source, filename=pack_version.source_filename)
    if not report.valid or report.bundle is None:
        raise PackDataError(f"pack version {pack_version} does not validate any more")
    pairs = report.grading_cases(input_set_key)
    challenges = {
        c.key: {"title": c.title or "", "category": c.category or "", "difficulty": str(c.difficulty or "")}
        for c in report.bundle.challenges
    }
    asset_ids: dict[tuple[str, str | None, str], str] = {}
    version_asset_ids: dict[str, str] = {}
    for scope, key, ch_key, case_key, public_id in Asset.objects.filter(version=pack_version).values_list(
        "scope", "key", "challenge__key", "case__case_key", "public_id"
    ):
        if scope == Asset.Scope.VERSION:
            version_asset_ids[key] = str(public_id)
        elif scope == Asset.Scope.CASE:
            for case, _ in pairs:
                if case.case_key == case_key:
                    asset_ids[(case.challenge_key, case_key, key)] = str(public_id)
        else:
            asset_ids[(ch_key, None, key)] = str(public_id)
    return VersionData(
        pack_slug=pack_version.pack.slug,
        pack_number=pack_version.number,
        execution_mode=report.bundle.version.execution_mode,
        spec=report.evaluation_spec,
        cases={(c.challenge_key, c.case_key): (c, ctx) for c, ctx in pairs},
        challenges=challenges,
        asset_ids=asset_ids,
        version_asset_ids=version_asset_ids,
    )


def clear_cache() -> None:
    with _lock:
        _cache.clear()
