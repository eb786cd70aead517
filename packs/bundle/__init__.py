"""The challenge pack bundle: loader, models, validator, stored forms (spec/pack-format.md).

Public API (everything else in this package is internal):

- ``validate_bundle(data, *, strict=False, filename=None) -> BundleReport``: validate a YAML
  document or a zip bundle; never raises on any input.
- ``BundleReport``: ``valid``, ``errors``, ``warnings``, ``to_body()``; when valid also
  ``bundle`` (typed, normalized), ``manifest`` (stored form), ``pack``, ``files`` (bound zip
  members), ``case_documents()``, ``case_defs(key)``, ``grade_context(case)``,
  ``grading_cases(key)``.
- ``BundleIssue``, ``CaseDocument``.
- ``select_input_set(manifest, selector, *, input_set_ids=None) -> Selection`` and
  ``SelectionError`` (pack-format §13).
- ``Bundle`` and the other models in ``packs.bundle.models``; ``pack_json_schema()``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from grading.engine.lazy import lazy_attributes

if TYPE_CHECKING:
    from .issues import BundleIssue
    from .models import Bundle
    from .report import BundleReport, CaseDocument
    from .schema import pack_json_schema
    from .selection import Selection, SelectionError, select_input_set
    from .validate import validate_bundle

# Loaded on first use (PEP 562): run creation needs only ``select_input_set``, and importing
# the models pulls in pydantic and the whole grading engine (~0.5 s of every CLI start-up).
_LAZY = {
    "Bundle": ".models",
    "BundleIssue": ".issues",
    "BundleReport": ".report",
    "CaseDocument": ".report",
    "Selection": ".selection",
    "SelectionError": ".selection",
    "pack_json_schema": ".schema",
    "select_input_set": ".selection",
    "validate_bundle": ".validate",
}

__all__ = [
    "Bundle",
    "BundleIssue",
    "BundleReport",
    "CaseDocument",
    "Selection",
    "SelectionError",
    "pack_json_schema",
    "select_input_set",
    "validate_bundle",
]


__getattr__, __dir__ = lazy_attributes(__name__, globals(), _LAZY)
