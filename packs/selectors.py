"""Reads that combine several QuerySet methods into one shape (API documents, diffs).

Each is pinned by an ``assertNumQueries`` test in tests/packs/test_models.py.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from packs.models import Case, Draft, Pack, PackVersion
from packs.services.drafts import version_members


def pack_document(pack: Pack, *, versions: list[PackVersion] | None = None) -> dict[str, Any]:
    """A pack with its versions (newest first) as the API shows it."""
    if versions is None:
        versions = list(pack.versions.all())
    return {
        "id": str(pack.public_id),
        "slug": pack.slug,
        "name": pack.name,
        "family": pack.family,
        "description": pack.description,
        "latest_number": versions[0].number if versions else None,
        "versions": [version_brief(v) for v in versions],
    }


def version_brief(version: PackVersion) -> dict[str, Any]:
    return {
        "id": str(version.public_id),
        "number": version.number,
        "content_hash": version.content_hash,
        "published_at": version.published_at.isoformat(),
    }


def version_summary(version: PackVersion) -> dict[str, Any]:
    """The manifest summary of one version loaded with ``PackVersion.objects.for_detail()``:
    challenges, input sets with case counts, cases and version assets.

    One query (the cases) on top of for_detail's four, whatever the version's size.
    """
    cases = Case.objects.for_version(version).only(
        "public_id",
        "case_key",
        "item_key",
        "position",
        "content_hash",
        "input_set",
        "input_set__key",
        "challenge",
        "challenge__key",
    )
    return {
        "id": str(version.public_id),
        "pack": {"id": str(version.pack.public_id), "slug": version.pack.slug, "name": version.pack.name},
        "number": version.number,
        "execution_mode": version.execution_mode,
        "content_hash": version.content_hash,
        "published_at": version.published_at.isoformat(),
        "published_by": version.published_by.get_username() if version.published_by else None,
        "warnings": version.warnings,
        "challenges": [
            {
                "key": c.key,
                "title": c.title,
                "category": c.category,
                "difficulty": c.difficulty,
            }
            for c in version.challenges.all()
        ],
        "input_sets": [
            {
                "id": str(s.public_id),
                "key": s.key,
                "name": s.name,
                "description": s.description,
                "challenge_key": s.challenge_key,
                "case_count": s.case_count,
            }
            for s in version.input_sets.all()
        ],
        "cases": [
            {
                "id": str(c.public_id),
                "input_set": c.input_set.key,
                "challenge_key": c.challenge.key,
                "case_key": c.case_key,
                "item_key": c.item_key,
                "content_hash": c.content_hash,
            }
            for c in cases
        ],
        "assets": [
            {"key": a.key, "path": a.path, "kind": a.kind, "media_type": a.media_type, "size": a.size}
            for a in version.version_assets  # type: ignore[attr-defined]
        ],
    }


def draft_document(draft: Draft, *, with_text: bool = True) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "id": str(draft.public_id),
        "name": draft.name,
        "files": dict(draft.files),
        "based_on": str(draft.based_on.public_id) if draft.based_on_id else None,  # type: ignore[union-attr]
        "created_at": draft.created_at.isoformat(),
        "updated_at": draft.updated_at.isoformat(),
    }
    if with_text:
        doc["bundle"] = draft.bundle_text
    return doc


@dataclass(frozen=True)
class DiffLine:
    kind: str  # "file", "hunk", "add", "del", "ctx"
    text: str


def version_diff(old: PackVersion, new: PackVersion, *, context: int = 3) -> list[DiffLine]:
    """A unified diff of two versions' sources, member by member (pack.yaml first).

    Binary members are compared by size and content, never shown. The caller renders
    each line as escaped text.
    """
    before, after = version_members(old), version_members(new)
    names = sorted(set(before) | set(after), key=lambda n: (n != "pack.yaml", n))
    lines: list[DiffLine] = []
    for name in names:
        a, b = before.get(name), after.get(name)
        if a == b:
            continue
        a_text, b_text = _text(a), _text(b)
        label_a = f"v{old.number}/{name}" if a is not None else "/dev/null"
        label_b = f"v{new.number}/{name}" if b is not None else "/dev/null"
        if a_text is None or b_text is None:
            lines.append(DiffLine("file", f"--- {label_a}"))
            lines.append(DiffLine("file", f"+++ {label_b}"))
            lines.append(DiffLine("hunk", f"binary file changed ({len(a or b'')} → {len(b or b'')} bytes)"))
            continue
        for raw in difflib.unified_diff(
            a_text.splitlines(), b_text.splitlines(), label_a, label_b, n=context, lineterm=""
        ):
            lines.append(DiffLine(_kind(raw), raw))
    return lines


def _text(data: bytes | None) -> str | None:
    if data is None:
        return ""
    if b"\x00" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _kind(raw: str) -> str:
    if raw.startswith(("---", "+++")):
        return "file"
    if raw.startswith("@@"):
        return "hunk"
    if raw.startswith("+"):
        return "add"
    if raw.startswith("-"):
        return "del"
    return "ctx"
