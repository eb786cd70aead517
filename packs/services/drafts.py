"""Drafts: mutable, workspace-scoped bundles, validatable any number of times (pack-format §12).

A draft is ``pack.yaml`` text plus optional files (zip members, each stored as a
content-addressed artifact). With files it is validated and published as a zip built
deterministically, so the same draft always yields the same bytes and the same result.
"""

from __future__ import annotations

import contextlib
import io
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db.models import F
from django.utils import timezone
from django.utils.text import slugify

from agentclash_site.workspaces.models import Workspace
from packs import bundle as pack_bundle
from packs.bundle import archive, limits
from packs.bundle.archive import build_zip  # reproducible: equal members, equal bytes
from packs.models import Artifact, Draft, Pack, PackVersion
from packs.services import yaml_edit
from packs.services.artifacts import artifact_read, artifact_store, artifacts_discard_unreferenced
from packs.services.publish import PublishResult, pack_version_publish

MAX_BUNDLE_TEXT = 5 * 1024 * 1024  # pack-format §2.1
MAX_DRAFT_NAME = 300  # Draft.name


class DraftError(Exception):
    """A draft edit that cannot be made; the message is shown to the author."""


class DraftConflict(DraftError):
    """The draft changed since the revision an edit was based on; nothing was written."""


def examples_dir() -> Path:
    return Path(getattr(settings, "AGENTCLASH_EXAMPLES_DIR", settings.BASE_DIR / "examples" / "packs"))


def draft_templates() -> list[dict[str, str]]:
    """The example packs a new draft can start from: ``[{name, title}]`` sorted by name."""
    root = examples_dir()
    out = []
    if root.is_dir():
        for path in sorted(root.iterdir()):
            if (path / "pack.yaml").is_file():
                out.append(
                    {"name": path.name, "title": path.name.replace("-", " ").replace("_", " ").title()}
                )
    return out


def draft_create(
    *,
    workspace: Workspace,
    user: Any,
    name: str,
    bundle_text: str = "",
    files: dict[str, str] | None = None,
    based_on: PackVersion | None = None,
) -> Draft:
    _check_text(bundle_text)
    return Draft.objects.create(
        workspace=workspace,
        name=_check_name(name or "Untitled draft"),
        bundle_text=bundle_text,
        files=_check_files(workspace, files or {}),
        based_on=based_on,
        created_by=user if getattr(user, "is_authenticated", False) else None,
    )


def draft_update(
    *,
    draft: Draft,
    name: str | None = None,
    bundle_text: str | None = None,
    files: dict[str, str] | None = None,
    revision: int | None = None,
) -> Draft:
    """Change what is given, if the draft is still at ``revision`` (the one the edit was based
    on; by default the one ``draft`` was read at), and count one more revision.

    The check and the write are one ``UPDATE ... WHERE revision = %s``: of two edits based on
    the same revision exactly one is stored, the other raises :class:`DraftConflict` and
    nothing of it is written (two tabs autosaving used to keep the last one silently).
    """
    values: dict[str, Any] = {}
    if name:
        values["name"] = _check_name(name)
    if bundle_text is not None:
        _check_text(bundle_text)
        values["bundle_text"] = bundle_text
    if files is not None:
        values["files"] = _check_files(draft.workspace, files)
    base = draft.revision if revision is None else revision
    values["updated_at"] = timezone.now()
    stored = Draft.objects.filter(pk=draft.pk, revision=base).update(revision=F("revision") + 1, **values)
    if not stored:
        raise DraftConflict(
            "this draft was changed elsewhere (in another tab or by another user); reload to see it."
        )
    for field_name, value in values.items():
        setattr(draft, field_name, value)
    draft.revision = base + 1
    return draft


def draft_delete(*, draft: Draft) -> None:
    draft.delete()


def _check_name(name: str) -> str:
    """An author's draft name, refused (never cut short) when it is too long."""
    if len(name) > MAX_DRAFT_NAME:
        raise DraftError(f"Draft name must be at most {MAX_DRAFT_NAME} characters (it has {len(name)}).")
    return name


def _derived_name(head: str, tail: str) -> str:
    """A name made from a pack's or template's (which may be long): ``head`` shortened so the
    whole fits, ``tail`` (the version number) kept."""
    room = MAX_DRAFT_NAME - len(tail)
    return (head if len(head) <= room else head[: room - 1] + "…") + tail


def _check_text(text: str) -> None:
    if len(text.encode()) > MAX_BUNDLE_TEXT:
        raise DraftError("pack.yaml must be at most 5 MiB")


def _clean_path(path: str) -> str:
    path = path.strip().replace("\\", "/")
    path = path[2:] if path.startswith("./") else path
    parts = path.split("/")
    if not path or path.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\x00" in path:
        raise DraftError(f"{path or 'the path'!r} must be a relative path inside the bundle")
    if path == "pack.yaml":
        raise DraftError("pack.yaml is the draft's text; upload other files")
    return path


def _check_files(workspace: Workspace, files: dict[str, str]) -> dict[str, str]:
    """``{path: artifact id}`` where every id names an artifact of this workspace."""
    cleaned = {_clean_path(path): str(artifact_id) for path, artifact_id in files.items()}
    ids = set(cleaned.values())
    try:
        found = {
            str(a)
            for a in Artifact.objects.filter(workspace=workspace, public_id__in=ids).values_list(
                "public_id", flat=True
            )
        }
    except Exception as exc:  # malformed UUIDs
        raise DraftError("files must map paths to artifact ids") from exc
    missing = sorted(path for path, artifact_id in cleaned.items() if artifact_id not in found)
    if missing:
        raise DraftError(f"{missing[0]}: must reference an artifact in this workspace")
    return dict(sorted(cleaned.items()))


def draft_file_add(
    *, draft: Draft, path: str, data: bytes, user: Any, media_type: str | None = None
) -> Draft:
    """Store ``data`` as an artifact (outside any transaction) and bind it at ``path``."""
    path = _clean_path(path)
    with _storing(draft.workspace, user) as store:
        files = {**draft.files, path: store(path, data, media_type)}
        return draft_update(draft=draft, files=files)


class _Store:
    """Stores draft files as artifacts and remembers the ones it created."""

    def __init__(self, workspace: Workspace, user: Any) -> None:
        self.workspace, self.user, self.created = workspace, user, []

    def __call__(self, path: str, data: bytes, media_type: str | None = None) -> str:
        result = artifact_store(
            workspace=self.workspace,
            data=data,
            filename=path.rsplit("/", 1)[-1],
            media_type=media_type,
            user=self.user,
        )
        if result.created:
            self.created.append(result.artifact)
        return str(result.artifact.public_id)


@contextlib.contextmanager
def _storing(workspace: Workspace, user: Any) -> Iterator[_Store]:
    """Artifacts are stored before the draft row that names them (never inside a transaction:
    storage may be remote); when the edit then fails (a conflict, a refused name), the ones
    this edit created and nothing names are discarded instead of left behind."""
    store = _Store(workspace, user)
    try:
        yield store
    except BaseException:
        artifacts_discard_unreferenced(store.created)
        raise


def draft_file_remove(*, draft: Draft, path: str) -> Draft:
    files = {p: a for p, a in draft.files.items() if p != path}
    return draft_update(draft=draft, files=files)


def draft_bundle(*, draft: Draft) -> bytes:
    """The bytes the draft validates and publishes as: its YAML, or a deterministic zip."""
    text = draft.bundle_text.encode()
    if not draft.files:
        return text
    artifacts = {
        str(a.public_id): a
        for a in Artifact.objects.filter(workspace=draft.workspace, public_id__in=list(draft.files.values()))
    }
    members = {"pack.yaml": text}
    for path, artifact_id in sorted(draft.files.items()):
        artifact = artifacts.get(artifact_id)
        if artifact is not None:
            members[path] = artifact_read(artifact=artifact)
    return build_zip(members)


def draft_validate(*, draft: Draft, strict: bool = False) -> Any:
    """The validate report of the draft's current bytes (a ``packs.bundle.BundleReport``)."""
    return pack_bundle.validate_bundle(draft_bundle(draft=draft), strict=strict)


def draft_publish(*, draft: Draft, user: Any, strict: bool = False) -> PublishResult:
    """Publish the draft; on success the draft is deleted (the version keeps its bytes)."""
    result = pack_version_publish(
        workspace=draft.workspace, data=draft_bundle(draft=draft), strict=strict, user=user
    )
    # A save from elsewhere since this one keeps the draft: its text is not in the version.
    Draft.objects.filter(pk=draft.pk, revision=draft.revision).delete()
    return result


BLANK_PACK = """\
# A challenge pack: see the pack format reference for every key.
pack:
  slug: __SLUG__
  name: __NAME__
  family: reasoning
version:
  number: 1
  execution_mode: prompt_eval
  evaluation_spec:
    name: __SLUG__-v1
    version_number: 1
    judge_mode: deterministic
    validators:
      - key: answer
        type: exact_match
        target: final_output
        expected_from: case.expectations.answer
    scorecard:
      pass_threshold: 1
      dimensions:
        - key: correctness
          source: validators
          validators: [answer]
challenges:
  - key: reverse
    title: Spell a word backwards
    category: basics
    difficulty: easy
    instructions: "Spell this word backwards and reply with that only: {{word}}"
input_sets:
  - key: default
    name: Default
    cases:
      # The expected answer must not appear in the payload or the instructions:
      # the answer_leak lint warns when it does.
      - challenge_key: reverse
        case_key: hello
        payload:
          word: hello
        expectations:
          - key: answer
            kind: text
            value: olleh
"""


def _yaml_quoted(text: str) -> str:
    """``text`` as a YAML double-quoted scalar: one value whatever it holds (``#``, ``: ``,
    quotes), printable characters as they are, the rest escaped (YAML refuses them raw)."""

    def char(c: str) -> str:
        if c in '"\\':
            return "\\" + c
        if c.isprintable():
            return c
        return f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}"

    return '"' + "".join(map(char, text)) + '"'


def draft_blank(*, workspace: Workspace, user: Any, name: str = "") -> Draft:
    """A draft of the blank pack, its pack named after the draft with a slug no published pack
    of the workspace has (every blank draft said ``my-pack``: the second one published was
    refused as version 1 of the first one's pack)."""
    title = " ".join(name.split()) or "New pack"
    slug = slugify(title)[: limits.PACK_SLUG - 4].strip("-") or "my-pack"
    text = BLANK_PACK.replace("__SLUG__", slug).replace("__NAME__", _yaml_quoted(title))
    return draft_create(
        workspace=workspace, user=user, name=name or title, bundle_text=_free_slug(workspace, text)
    )


def draft_from_template(*, workspace: Workspace, user: Any, template: str, name: str = "") -> Draft:
    """A draft holding one of the example packs; the files its assets name become draft files."""
    from packs.services.cli import read_bundle_path

    names = {t["name"] for t in draft_templates()}
    if template not in names:
        raise DraftError(f"no template named {template!r}")
    root = examples_dir() / template
    members = bundle_members(read_bundle_path(root))
    text = _free_slug(workspace, members.pop("pack.yaml", b"").decode("utf-8", errors="replace"))
    with _storing(workspace, user) as store:
        files = {path: store(path, content) for path, content in sorted(members.items())}
        return draft_create(
            workspace=workspace,
            user=user,
            name=name or _derived_name(f"New pack from {template}", ""),
            bundle_text=text,
            files=files,
        )


def draft_from_file(
    *, workspace: Workspace, user: Any, data: bytes, filename: str = "", name: str = ""
) -> Draft:
    """A draft of a pack file someone already has: a pack YAML, or a zip bundle (its
    ``pack.yaml`` becomes the draft's text, its other members the draft's files). The pack
    keeps its own slug and version number: importing is how a pack authored elsewhere (an
    upstream AgentClash pack) is opened in the editor, validated, and published."""
    label = filename or "the file"
    if archive.is_zip(data):
        try:
            members = bundle_members(data)
        except DraftError as exc:
            raise DraftError(f"{label}: {exc}{_nested_pack_hint(data)}") from None
    elif len(data) > MAX_BUNDLE_TEXT:
        raise DraftError(f"{label}: a pack YAML must be at most 5 MiB (it has {len(data):,} bytes).")
    else:
        members = {"pack.yaml": data}
    raw = members.pop("pack.yaml")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DraftError(
            f"{label}: pack.yaml is not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}); "
            "save it as UTF-8 and open it again."
        ) from None
    if "\x00" in text:
        raise DraftError(
            f"{label}: pack.yaml holds a NUL character (offset {text.index(chr(0))}): a pack is text, "
            "is this the right file?"
        )
    with _storing(workspace, user) as store:
        files = {path: store(path, content) for path, content in sorted(members.items())}
        return draft_create(
            workspace=workspace,
            user=user,
            name=name or _derived_name(f"Opened from {filename}" if filename else "Opened pack", ""),
            bundle_text=text,
            files=files,
        )


def _nested_pack_hint(data: bytes) -> str:
    """Where a zip made by compressing the pack's folder has its pack.yaml, and what to do
    (``"; it has x/pack.yaml: zip what is inside x/, not the folder."``), or ""."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as bundle:
            names = bundle.namelist()
    except (zipfile.BadZipFile, OSError, ValueError):
        return ""
    if "pack.yaml" in names:
        return ""
    nested = sorted((n for n in names if n.endswith("/pack.yaml")), key=lambda n: (n.count("/"), n))
    if not nested:
        return ""
    folder = nested[0][: -len("pack.yaml")]
    return f"; it has {nested[0]}: zip what is inside {folder}, not the folder."


def _free_slug(workspace: Workspace, text: str) -> str:
    """A template's bundle with ``pack.slug`` made free in the workspace (``mental-math-2``
    once ``mental-math`` is published): a second pack from the same template published as
    version 1 of the first one's slug and was refused (409, version exists) however it was
    edited. A new version of a published pack starts from that version, not a template."""
    try:
        slug = yaml_edit.pack_slug(text)
    except yaml_edit.YamlEditError:
        return text
    taken = set(
        Pack.objects.filter(workspace=workspace, slug__startswith=slug).values_list("slug", flat=True)
    )
    if not slug or slug not in taken:
        return text
    free = next(f"{slug}-{n}" for n in range(2, len(taken) + 3) if f"{slug}-{n}" not in taken)
    with contextlib.suppress(yaml_edit.YamlEditError):
        text = yaml_edit.set_pack_slug(text, free)
    return text


def draft_from_version(*, version: PackVersion, user: Any) -> Draft:
    """A draft of the next version: the version's bundle with ``version.number`` set to one
    more than the pack's highest published number (comments and formatting kept)."""
    members = version_members(version)
    text = members.pop("pack.yaml", b"").decode("utf-8", errors="replace")
    latest = (
        PackVersion.objects.filter(pack=version.pack).order_by("-number").values_list("number", flat=True)[0]
    )
    # A published bundle always parses; should ruamel disagree, keep the text as it is.
    with contextlib.suppress(yaml_edit.YamlEditError):
        text = yaml_edit.set_version_number(text, latest + 1)
    with _storing(version.pack.workspace, user) as store:
        files = {path: store(path, content) for path, content in members.items()}
        return draft_create(
            workspace=version.pack.workspace,
            user=user,
            name=_derived_name(version.pack.name, f" v{latest + 1}"),
            bundle_text=text,
            files=files,
            based_on=version,
        )


def version_members(version: PackVersion) -> dict[str, bytes]:
    """``{member: bytes}`` of a version's source: ``{"pack.yaml": ...}`` for a YAML bundle."""
    return bundle_members(bytes(version.source))


def bundle_members(source: bytes) -> dict[str, bytes]:
    """``{member: bytes}`` of a validated bundle: a zip's regular members, or its YAML alone.

    A zip is read as the validator read it (``archive.read_zip``), so each member has the
    normalized name its assets bound (pack-format §2.2: ``./data//x.json`` is
    ``data/x.json``), and a draft of the version binds the same files."""
    if not archive.is_zip(source):
        return {"pack.yaml": source}
    bundle, issues = archive.read_zip(source)
    if bundle is None:  # not a bundle that validated: nothing to edit
        first = issues[0]
        raise DraftError(f"the bundle {first.message}" + (f" ({first.detail})" if first.detail else ""))
    return {"pack.yaml": bundle.pack_yaml, **bundle.files}


def draft_case_upsert(*, draft: Draft, edit: yaml_edit.CaseEdit) -> Draft:
    """Add or replace a case through the structured form; the YAML keeps its comments."""
    try:
        text = yaml_edit.upsert_case(draft.bundle_text, edit)
    except yaml_edit.YamlEditError as exc:
        raise DraftError(str(exc)) from exc
    return draft_update(draft=draft, bundle_text=text)


def draft_case_delete(*, draft: Draft, input_set_key: str, case_key: str) -> Draft:
    try:
        text = yaml_edit.delete_case(draft.bundle_text, input_set_key=input_set_key, case_key=case_key)
    except yaml_edit.YamlEditError as exc:
        raise DraftError(str(exc)) from exc
    return draft_update(draft=draft, bundle_text=text)
