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

from .issues import BundleIssue
from .models import Bundle
from .report import BundleReport, CaseDocument
from .schema import pack_json_schema
from .selection import Selection, SelectionError, select_input_set
from .validate import validate_bundle

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
