"""The validation report and the stored forms it hands to publish and runs (pack-format §6).

``BundleReport`` is what ``validate_bundle`` returns. Every report has ``valid``,
``errors``, ``warnings`` and ``to_body()`` (the validate body of spec/interfaces.md §4). A
valid report also carries the normalized ``bundle`` (typed), its ``manifest`` (the stored
form of §6, never ``items``), ``pack`` metadata, the bound zip ``files``, and helpers:
``case_documents()`` (each case's stored document and content hash), ``case_defs()`` and
``grading_cases()`` (the grading engine's typed cases, with their contexts).
"""

from __future__ import annotations

import dataclasses
import hashlib
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from grading.engine.spec import EvaluationSpec
from grading.engine.types import (
    MISSING,
    AssetRef,
    CaseDef,
    CaseExpectation,
    CaseInput,
    GradeContext,
    canonical_json,
)

from . import archive
from .issues import BundleIssue, Path, format_path
from .models import Asset, Bundle, Case, Challenge, PackMeta

if TYPE_CHECKING:
    from .yamlload import YamlDocument

MANIFEST_SCHEMA_VERSION = 1
CASE_SCHEMA_VERSION = 1
DEFAULT_WORKING_DIRECTORY = "/workspace"
_CASE_MEMBERS = ("inputs", "expectations", "user_simulator", "artifacts", "assets")


@dataclass(frozen=True, slots=True)
class CaseDocument:
    """One case as stored (pack-format §6) with the keys it is stored under."""

    input_set_key: str
    position: int
    challenge_key: str
    case_key: str  # the effective key; it also fills the item-key column
    item_key: str
    document: Any  # the payload (legacy payload-only) or the {schema_version: 1, ...} envelope
    content_hash: str  # sha256 of the document's canonical JSON

    @property
    def legacy(self) -> bool:
        return not (
            isinstance(self.document, dict) and self.document.get("schema_version") == CASE_SCHEMA_VERSION
        )


def _reads_as_envelope(document: Any) -> bool:
    """Whether a stored document reads as the v1 envelope rather than a bare payload: the
    interchange rule of pack-format §6, an object whose ``schema_version`` is a non-zero
    integer (``true`` included: a Python bool is an int, and ``stored_case`` compares ``== 1``)."""
    if not isinstance(document, dict):
        return False
    version = document.get("schema_version")
    return isinstance(version, int) and version != 0


def case_document(case: Case) -> Any:
    """The stored form of a case: its payload when legacy payload-only, else the envelope."""
    dumped = case.model_dump(mode="json", exclude_none=True)
    if not any(dumped.get(name) for name in _CASE_MEMBERS) and case.case_timeout_seconds == 0:
        payload = dumped.get("payload") or {}
        if not _reads_as_envelope(payload):
            return payload
        # A payload with its own schema_version: 1 stored bare would read back as an
        # envelope (runs failed on its other keys as unknown, or lost the payload): the
        # envelope keeps it a payload, for runs here and for upstream's import alike.
    document: dict[str, Any] = {"schema_version": CASE_SCHEMA_VERSION, "case_key": case.effective_key}
    for name in ("payload", *_CASE_MEMBERS, "case_timeout_seconds"):
        value = dumped.get(name)
        if value:
            document[name] = value
    return document


def content_hash(document: Any) -> str:
    return hashlib.sha256(canonical_json(document).encode("utf-8")).hexdigest()


def asset_ref(asset: Asset, scope: str, files: dict[str, bytes]) -> AssetRef:
    member = None if archive.is_absolute(asset.path) else archive.normalize_asset_path(asset.path)
    bound = member is not None and member in files
    data = files.get(member) if bound and member is not None else None
    return AssetRef(
        key=asset.key,
        path=asset.path,
        kind=asset.kind or "",
        media_type=asset.media_type or "",
        scope=scope,
        artifact_id=asset.artifact_id,
        sha256=hashlib.sha256(data).hexdigest() if data is not None else None,
        size=len(data) if data is not None else None,
        has_file=bound,
    )


def case_def(case: Case, files: dict[str, bytes], *, content: str | None = None) -> CaseDef:
    """A case of the manifest as the grading engine's ``CaseDef``. The names every case
    repeats (challenge, payload and expectation keys, kinds) are interned: a runs worker
    keeps thousands of cases, each parsed from its own JSON document."""
    named: list[str] = [ref.key for ref in case.artifacts]
    return CaseDef(
        challenge_key=sys.intern(case.challenge_key),
        case_key=case.effective_key,
        payload=_interned_keys(case.payload),
        inputs=[
            CaseInput(
                key=i.key,
                kind=i.kind,
                value=i.value if i.has_value else MISSING,
                artifact_key=i.artifact_key,
                path=i.path,
            )
            for i in case.inputs
        ],
        expectations=[
            CaseExpectation(
                key=sys.intern(e.key),
                kind=sys.intern(e.kind) if e.kind else e.kind,
                value=e.value if e.has_value else MISSING,
                source=e.source,
                artifact_key=e.artifact_key,
            )
            for e in case.expectations
        ],
        assets=[asset_ref(a, "case", files) for a in case.assets],
        artifact_keys=named,
        content_hash=content,
        timeout_seconds=max(0, case.case_timeout_seconds),
    )


def _interned_keys(payload: Any) -> dict[str, Any]:
    if not isinstance(payload, dict):
        return dict(payload)
    return {sys.intern(k) if type(k) is str else k: v for k, v in payload.items()}


def empty_case_def(challenge_key: str) -> CaseDef:
    """The one empty case of a run without an input set (pack-format §13)."""
    return CaseDef(challenge_key=challenge_key, case_key=challenge_key, payload={}, empty_case=True)


@dataclass
class BundleReport:
    valid: bool
    errors: list[BundleIssue] = field(default_factory=list)
    warnings: list[BundleIssue] = field(default_factory=list)
    bundle: Bundle | None = None  # normalized (items became cases), when valid
    manifest: dict[str, Any] | None = None  # pack-format §6, when valid
    files: dict[str, bytes] = field(default_factory=dict)  # bound zip members: path -> bytes
    is_zip: bool = False
    # The parsed YAML (whenever it parsed: the editor's outline reads it) with positions for
    # issues found after validation (publish-time rules), and the input sets whose cases
    # were written as legacy ``items`` (when valid).
    document: YamlDocument | None = field(default=None, repr=False, compare=False)
    legacy_sets: frozenset[int] = frozenset()
    # challenge key -> the grading context its cases share (grade_context)
    _contexts: dict[str, GradeContext] = field(default_factory=dict, init=False, repr=False, compare=False)

    # -- the validate body ------------------------------------------------------------
    def to_body(self) -> dict[str, Any]:
        """``{"valid", "errors", "warnings"}`` exactly (spec/interfaces.md §4)."""
        return {
            "valid": self.valid,
            "errors": [issue.to_dict() for issue in self.errors],
            "warnings": [issue.to_dict() for issue in self.warnings],
        }

    # -- issues found later (publish) --------------------------------------------------
    def source_path(self, path: Path) -> Path:
        """A path into the normalized bundle (or the manifest) as the author wrote it: a case
        of a set written as legacy ``items`` is ``items[j]``, its key ``item_key`` (§3)."""
        if len(path) >= 4 and path[0] == "input_sets" and path[2] == "cases" and path[1] in self.legacy_sets:
            rest = path[4:]
            if rest == ("case_key",):
                rest = ("item_key",)
            path = (*path[:2], "items", path[3], *rest)
        return path

    def issue_at(self, path: Path, message: str) -> BundleIssue:
        """An error about the value at ``path`` (a normalized path), with the value's line
        and column (pack-format §3), as the validator itself would report it."""
        source = self.source_path(path)
        line = column = None
        if self.document is not None:
            line, column = self.document.value_position(source)
        return BundleIssue(field=format_path(source), message=message, line=line, column=column)

    # -- typed access -------------------------------------------------------------------
    def _require(self) -> Bundle:
        if self.bundle is None:
            raise ValueError("the bundle is invalid: it has no manifest")
        return self.bundle

    @property
    def pack(self) -> PackMeta | None:
        return self.bundle.pack if self.bundle is not None else None

    @property
    def evaluation_spec(self) -> EvaluationSpec:
        return self._require().version.evaluation_spec

    def challenge(self, key: str) -> Challenge | None:
        return next((c for c in self._require().challenges if c.key == key), None)

    def input_set_keys(self) -> list[str]:
        return [s.key for s in self._require().input_sets]

    # -- stored forms ---------------------------------------------------------------------
    def case_documents(self) -> dict[str, list[CaseDocument]]:
        """Per input set key, each case's stored document in set order (pack-format §6)."""
        out: dict[str, list[CaseDocument]] = {}
        for input_set in self._require().input_sets:
            docs = []
            for position, case in enumerate(input_set.cases):
                document = case_document(case)
                docs.append(
                    CaseDocument(
                        input_set_key=input_set.key,
                        position=position,
                        challenge_key=case.challenge_key,
                        case_key=case.effective_key,
                        item_key=case.effective_key,
                        document=document,
                        content_hash=content_hash(document),
                    )
                )
            out[input_set.key] = docs
        return out

    def case_defs(self, input_set_key: str | None) -> list[CaseDef]:
        """The engine's cases of one input set, or (``None``) the zero-set run's empty cases."""
        bundle = self._require()
        if input_set_key is None:
            return [empty_case_def(c.key) for c in bundle.challenges]
        input_set = next((s for s in bundle.input_sets if s.key == input_set_key), None)
        if input_set is None:
            raise KeyError(input_set_key)
        return [
            case_def(case, self.files, content=content_hash(case_document(case))) for case in input_set.cases
        ]

    def grade_context(self, case: CaseDef) -> GradeContext:
        """The grading context of a case outside any run (offline ``grade``): the challenge,
        its instructions rendered for the case, assets with a loader for bundled files.

        Only the rendered instructions differ between the cases of a challenge: the rest
        (asset maps, tool policy, the loader) is built once per challenge and shared, so a
        runs worker that keeps thousands of cases holds one copy of it."""
        from grading.engine.refs import render_template

        template = self._contexts.get(case.challenge_key)
        if template is None:
            template = self._contexts[case.challenge_key] = self._challenge_context(case.challenge_key)
        return dataclasses.replace(
            template, rendered_instructions=render_template(template.challenge_instructions, case)
        )

    def _challenge_context(self, challenge_key: str) -> GradeContext:
        bundle = self._require()
        version = bundle.version
        challenge = self.challenge(challenge_key)
        instructions = (challenge.instructions or "") if challenge is not None else ""
        files = self.files

        def loader(asset: AssetRef) -> bytes | None:
            if archive.is_absolute(asset.path):
                return None
            return files.get(archive.normalize_asset_path(asset.path))

        return GradeContext(
            pack_slug=bundle.pack.slug,
            pack_version=version.number,
            challenge_key=sys.intern(challenge_key),
            challenge_instructions=instructions,
            version_assets={a.key: asset_ref(a, "version", files) for a in version.assets},
            challenge_assets=(
                {a.key: asset_ref(a, "challenge", files) for a in challenge.assets} if challenge else {}
            ),
            challenge_artifact_keys=[r.key for r in challenge.artifact_refs] if challenge else [],
            asset_loader=loader,
            working_directory=version.filesystem.working_directory or DEFAULT_WORKING_DIRECTORY,
            execution_mode=version.execution_mode,
            tool_policy=version.tool_policy.model_dump(mode="json", exclude_none=True),
        )

    def grading_cases(self, input_set_key: str | None) -> list[tuple[CaseDef, GradeContext]]:
        return [(case, self.grade_context(case)) for case in self.case_defs(input_set_key)]


# ---------------------------------------------------------------------------
# Normalization of the typed document and the manifest (pack-format §5, §6)
# ---------------------------------------------------------------------------


def normalize_bundle(bundle: Bundle) -> Bundle:
    """Items become cases, empty case/item keys take each other, instructions are copied to
    ``definition.instructions``, an empty ``deployment_defaults`` is dropped. In place."""
    for input_set in bundle.input_sets:
        if input_set.items and not input_set.cases:
            input_set.cases = [
                Case(
                    challenge_key=item.challenge_key,
                    case_key=item.item_key,
                    item_key=item.item_key,
                    payload=item.payload,
                    assets=item.assets,
                )
                for item in input_set.items
            ]
        input_set.items = []
        for case in input_set.cases:
            key = case.effective_key
            case.case_key = (case.case_key or "").strip() or key
            case.item_key = (case.item_key or "").strip() or case.case_key
    for challenge in bundle.challenges:
        if challenge.instructions and "instructions" not in challenge.definition:
            challenge.definition = {**challenge.definition, "instructions": challenge.instructions}
    defaults = bundle.version.deployment_defaults
    if defaults is not None and not defaults.aliases and not defaults.lineups:
        bundle.version.deployment_defaults = None
    elif defaults is not None:
        if defaults.aliases:
            defaults.aliases = {name.strip(): selector for name, selector in defaults.aliases.items()}
        if defaults.lineups:
            defaults.lineups = {name.strip(): selectors for name, selectors in defaults.lineups.items()}
    return bundle


def build_manifest(bundle: Bundle) -> dict[str, Any]:
    """The normalized stored form of a version (pack-format §6); never ``items``."""
    dumped = bundle.model_dump(mode="json", exclude_none=True)
    version = dumped["version"]
    spec = bundle.version.evaluation_spec
    evaluation_spec = version["evaluation_spec"]
    evaluation_spec["scorecard"]["dimensions"] = [
        d.model_dump(mode="json", exclude_none=True) for d in spec.dimensions
    ]
    manifest_version: dict[str, Any] = {
        "number": version["number"],
        "assets": version.get("assets", []),
        "execution_mode": version.get("execution_mode") or "native",
    }
    sandbox = version.get("sandbox")
    if sandbox and sandbox.get("sandbox_template_id"):
        manifest_version["sandbox_template_id"] = sandbox["sandbox_template_id"]
    if version.get("deployment_defaults"):
        manifest_version["deployment_defaults"] = version["deployment_defaults"]
    manifest: dict[str, Any] = {
        "schema_version": MANIFEST_SCHEMA_VERSION,
        "pack": dumped["pack"],
        "version": manifest_version,
        "tool_policy": version.get("tool_policy", {}),
        "filesystem": version.get("filesystem", {}),
        "evaluation_spec": evaluation_spec,
        "challenges": dumped["challenges"],
        "input_sets": [{k: v for k, v in s.items() if k != "items"} for s in dumped.get("input_sets", [])],
    }
    for name in ("modality", "interface_spec", "scenario", "tools", "security"):
        if dumped.get(name) is not None:
            manifest[name] = dumped[name]
    if sandbox is not None:
        manifest["sandbox"] = sandbox
    return manifest
