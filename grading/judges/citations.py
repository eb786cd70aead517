"""Citations for display: the evidence text behind every id a judge verdict or a model claim
cites, so case pages can show each citation (``templates/grading/_judge_verdict.html``).

``citation_texts(grade_doc, evidence, case, context)`` collects the ids of the judge
expectations (``evidence_refs`` and each sample's ``citations``) and of ``source: llm`` claims
and resolves them with the engine's §1.2 resolver. n_wise ids carry a lane label
(``B/final_output``): only the lane's own label resolves here (other lanes' evidence belongs to
their pages). Texts are cut at 2,000 characters for display.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from grading.engine.refs import resolve_evidence_id

DISPLAY_LIMIT = 2000


def cited_ids(grade_doc: Mapping[str, Any]) -> list[str]:
    ids: list[str] = []

    def add(value: Any) -> None:
        if isinstance(value, str) and value and value not in ids:
            ids.append(value)

    for e in grade_doc.get("expectations") or []:
        if e.get("kind") != "judge":
            continue
        for ref in e.get("evidence_refs") or []:
            add(ref)
        for sample in (e.get("details") or {}).get("samples") or []:
            for c in sample.get("citations") or []:
                add(c.get("id"))
    for claim in grade_doc.get("claims") or []:
        if claim.get("source") == "llm":
            for ref in claim.get("evidence_refs") or []:
                add(ref)
    return ids


def citation_texts(
    grade_doc: Mapping[str, Any],
    evidence: Any,
    case: Any,
    context: Any,
    *,
    checks: Mapping[str, Any] | None = None,
) -> dict[str, str | None]:
    """id -> resolved text (cut for display), or None when it does not resolve here."""
    own_labels = {
        str((e.get("details") or {}).get("label"))
        for e in grade_doc.get("expectations") or []
        if (e.get("details") or {}).get("mode") == "n_wise" and (e.get("details") or {}).get("label")
    }
    out: dict[str, str | None] = {}
    for cid in cited_ids(grade_doc):
        label, sep, rest = cid.partition("/")
        target = rest if sep and label in own_labels else cid
        if sep and label.isupper() and len(label) == 1 and label not in own_labels:
            out[cid] = None  # another lane's evidence
            continue
        text = resolve_evidence_id(target, evidence, case, context, checks=checks or {})
        if text is not None and len(text) > DISPLAY_LIMIT:
            text = text[:DISPLAY_LIMIT] + "…"
        out[cid] = text
    return out
